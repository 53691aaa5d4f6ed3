"""Plan-file loading and validation: valid plans, and one exact message per bad plan."""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from executor.config import CONFIG_FIELDS, CONFIG_MAXIMA, ExecutorConfig
from executor.plan import (
    PLAN_FIELDS,
    CapabilitySpec,
    Plan,
    PlanError,
    StepSpec,
    ToolSpec,
    load_plan,
    parse_plan,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_PLANS = sorted((REPO_ROOT / "examples" / "plans").glob("*.json"))
PLAN_DOC = REPO_ROOT / "docs" / "plan-file.md"


def base_plan() -> dict[str, Any]:
    """A valid three-step plan that the bad-plan cases each break in one place."""
    return {
        "query": "Weather in Paris, then book a hotel",
        "tools": {
            "weather": {"base_url": "http://127.0.0.1:8101"},
            "hotel": {"base_url": "http://127.0.0.1:8102/", "headers": {"X-Api-Key": "demo"}},
        },
        "capabilities": {
            "weather.forecast": {
                "path": "/capabilities/forecast",
                "description": "Daily forecast",
                "schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
            "hotel.search": {"side_effects": "idempotent"},
            "hotel.book": {"path": "/book", "side_effects": "unsafe"},
        },
        "steps": [
            {
                "id": "step-1",
                "tool": "weather",
                "capability": "forecast",
                "parameters": {"city": "Paris"},
            },
            {
                "id": "step-2",
                "tool": "hotel",
                "capability": "search",
                "parameters": {"city_code": "PAR", "nights": 2},
            },
            {
                "id": "step-3",
                "tool": "hotel",
                "capability": "book",
                "parameters": {
                    "hotel_id": "{{step-2.data.hotels.0.id}}",
                    "amount": 240,
                    "note": "rain expected: {{step-1.data.rain}}",
                },
                "depends_on": ["step-2"],
                "hitl_approved": ["amount"],
                "instruction": "Book the cheapest hotel",
            },
        ],
        "config": {"max_attempts": 3},
    }


# ---------------------------------------------------------------- valid plans


def test_parsed_plan_has_typed_records_and_defaults() -> None:
    plan = parse_plan(base_plan(), "plan.json")
    assert plan.query == "Weather in Paris, then book a hotel"
    assert plan.tools["hotel"] == ToolSpec("hotel", "http://127.0.0.1:8102/", {"X-Api-Key": "demo"})
    assert plan.capabilities["hotel.search"] == CapabilitySpec(
        key="hotel.search",
        tool="hotel",
        name="search",
        path="/capabilities/search",
        description="",
        schema=None,
        orchestrator=False,
        side_effects="idempotent",
    )
    assert plan.steps[2] == StepSpec(
        id="step-3",
        tool="hotel",
        capability="book",
        parameters={
            "hotel_id": "{{step-2.data.hotels.0.id}}",
            "amount": 240,
            "note": "rain expected: {{step-1.data.rain}}",
        },
        depends_on=("step-2",),
        hitl_approved=("amount",),
        instruction="Book the cheapest hotel",
    )
    assert plan.config == {"max_attempts": 3}
    assert (plan.llm, plan.source_path) == (None, None)
    assert plan.raw == base_plan()


def test_plan_round_trips_through_to_dict() -> None:
    plan = parse_plan(base_plan(), "plan.json")
    written = json.loads(json.dumps(plan.to_dict()))
    reparsed = parse_plan(written, "plan.json")
    assert reparsed.to_dict() == plan.to_dict()
    assert (reparsed.tools, reparsed.capabilities, reparsed.steps) == (
        plan.tools,
        plan.capabilities,
        plan.steps,
    )
    assert written["capabilities"]["hotel.search"]["path"] == "/capabilities/search"
    assert "llm" not in written


def test_round_trip_keeps_the_llm_block() -> None:
    data = base_plan() | {"llm": {"model": "demo", "timeout_s": 30}}
    plan = parse_plan(data)
    assert parse_plan(plan.to_dict()).llm == {"model": "demo", "timeout_s": 30}


def test_plan_does_not_alias_the_input() -> None:
    data = base_plan()
    plan = parse_plan(data)
    data["steps"][0]["parameters"]["city"] = "Lyon"
    data["config"]["max_attempts"] = 9
    assert plan.steps[0].parameters == {"city": "Paris"}
    assert plan.config == {"max_attempts": 3}
    assert plan.raw["steps"][0]["parameters"] == {"city": "Paris"}


def test_query_is_optional() -> None:
    data = base_plan()
    del data["query"]
    assert parse_plan(data).query == ""


URL_CASES = [
    ("base_url_without_trailing_slash", "step-1", "http://127.0.0.1:8101/capabilities/forecast"),
    ("trailing_slash_is_dropped", "step-2", "http://127.0.0.1:8102/capabilities/search"),
    ("explicit_path", "step-3", "http://127.0.0.1:8102/book"),
]


@pytest.mark.parametrize(
    ("step_id", "url"), [case[1:] for case in URL_CASES], ids=[case[0] for case in URL_CASES]
)
def test_url_for(step_id: str, url: str) -> None:
    plan = parse_plan(base_plan())
    assert plan.url_for(step_id) == url
    assert plan.url_for(plan.step(step_id)) == url


def test_capability_for_a_step() -> None:
    plan = parse_plan(base_plan())
    assert plan.capability_for("step-3").side_effects == "unsafe"
    assert plan.capability_for(plan.steps[0]).key == "weather.forecast"


def test_dependencies_include_bound_steps_after_depends_on() -> None:
    plan = parse_plan(base_plan())
    assert plan.step_ids == ("step-1", "step-2", "step-3")
    assert plan.dependencies_of("step-3") == ("step-2", "step-1")
    assert plan.dependencies_of("step-1") == ()


def test_bindings_match_step_ids_ignoring_case() -> None:
    data = base_plan()
    data["steps"][1]["parameters"]["city_code"] = "{{STEP-1.data.iata}}"
    assert parse_plan(data).dependencies_of("step-2") == ("step-1",)


def test_non_step_placeholders_are_left_to_the_tool() -> None:
    data = base_plan()
    data["steps"][0]["parameters"] = {"date": "{{now.date}}", "who": "{{user}}", "n": [1, None]}
    plan = parse_plan(data)
    assert plan.dependencies_of("step-1") == ()


def test_topological_order_puts_dependencies_first_and_keeps_plan_order() -> None:
    data = base_plan()
    data["steps"] = [data["steps"][2], data["steps"][0], data["steps"][1]]
    plan = parse_plan(data)
    assert plan.step_ids == ("step-3", "step-1", "step-2")
    assert plan.topological_order() == ("step-1", "step-2", "step-3")


def test_load_plan_reads_the_file_and_records_its_path(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(base_plan()), encoding="utf-8")
    plan = load_plan(path)
    assert plan.source_path == str(path)
    assert plan.raw == base_plan()


def test_load_plan_accepts_a_utf8_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(base_plan()).encode())
    assert load_plan(path).step_ids == ("step-1", "step-2", "step-3")


@pytest.mark.parametrize("path", EXAMPLE_PLANS, ids=[path.stem for path in EXAMPLE_PLANS])
def test_example_plans_are_valid(path: Path) -> None:
    plan = load_plan(path)
    assert parse_plan(plan.to_dict()).to_dict() == plan.to_dict()


def test_there_are_example_plans() -> None:
    assert {path.name for path in EXAMPLE_PLANS} >= {"minimal.json", "travel.json"}


# ---------------------------------------------------------------- bad plans


def set_at(*path_and_value: Any) -> Callable[[dict], Any]:
    """A mutation that sets plan[p0][p1]...[pn] = value."""
    *path, value = path_and_value

    def mutate(plan: dict) -> None:
        target = plan
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = copy.deepcopy(value)

    return mutate


def drop_at(*path: Any) -> Callable[[dict], Any]:
    """A mutation that deletes plan[p0]...[pn]."""

    def mutate(plan: dict) -> None:
        target = plan
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return mutate


def both(*mutations: Callable[[dict], Any]) -> Callable[[dict], Any]:
    """A mutation that applies each of `mutations` in turn."""

    def mutate(plan: dict) -> None:
        for mutation in mutations:
            mutation(plan)

    return mutate


def replace_with(value: Any) -> Callable[[dict], Any]:
    """A mutation that replaces the whole plan."""
    return lambda plan: value


ALL_CONFIG_KEYS = (
    "backoff_factor, circuit_breaker_enabled, error_analyzer_enabled, initial_delay_ms, "
    "jitter, llm_debug_enabled, max_attempts, max_concurrency, max_delay_ms, max_llm_calls, "
    "max_repeated_errors, max_response_body_bytes, max_retries_per_tool, max_semantic_retries, "
    "max_total_tokens, max_validation_retries, max_wall_clock_s, retry_after_max_ms, "
    "semantic_retry_enabled, "
    "semantic_retry_independent_steps, timeout_s, validation_feedback_enabled"
)
STEP_FIELDS = "capability, depends_on, hitl_approved, id, instruction, parameters, tool"

BAD_PLANS = [
    # -- top level
    (
        "top_level_array",
        replace_with([]),
        "",
        "expected a JSON object at the top level, got an array",
    ),
    (
        "top_level_unknown_field",
        set_at("stepz", []),
        "",
        'unknown field "stepz" (expected one of: capabilities, config, llm, query, steps, tools)',
    ),
    ("missing_tools", drop_at("tools"), "", 'missing required field "tools"'),
    ("missing_steps", drop_at("steps"), "", 'missing required field "steps"'),
    ("query_not_a_string", set_at("query", 42), "query", "expected a string, got 42"),
    # -- tools
    ("tools_not_an_object", set_at("tools", []), "tools", "expected an object, got an array"),
    (
        "tool_name_with_space",
        set_at("tools", "my tool", {"base_url": "http://127.0.0.1:1"}),
        'tools["my tool"]',
        'expected a tool name of ASCII letters, digits, "_" and "-", got "my tool"',
    ),
    (
        "tool_unknown_field",
        set_at("tools", "weather", "baseurl", "http://x"),
        "tools.weather",
        'unknown field "baseurl" (expected one of: base_url, headers)',
    ),
    (
        "tool_missing_base_url",
        drop_at("tools", "weather", "base_url"),
        "tools.weather",
        'missing required field "base_url"',
    ),
    (
        "base_url_ftp",
        set_at("tools", "weather", "base_url", "ftp://127.0.0.1:8101"),
        "tools.weather.base_url",
        'expected an http:// or https:// URL, got "ftp://127.0.0.1:8101"',
    ),
    (
        "base_url_without_scheme",
        set_at("tools", "weather", "base_url", "127.0.0.1:8101"),
        "tools.weather.base_url",
        'expected an http:// or https:// URL, got "127.0.0.1:8101"',
    ),
    (
        "base_url_with_query",
        set_at("tools", "weather", "base_url", "http://127.0.0.1:8101/?key=1"),
        "tools.weather.base_url",
        'expected a URL without query or fragment, got "http://127.0.0.1:8101/?key=1"',
    ),
    (
        "base_url_port_out_of_range",
        set_at("tools", "weather", "base_url", "http://127.0.0.1:99999"),
        "tools.weather.base_url",
        'expected a port from 0 to 65535, got "99999" in "http://127.0.0.1:99999"',
    ),
    (
        "base_url_port_not_a_number",
        set_at("tools", "weather", "base_url", "http://127.0.0.1:abc/v1"),
        "tools.weather.base_url",
        'expected a port from 0 to 65535, got "abc" in "http://127.0.0.1:abc/v1"',
    ),
    (
        "header_value_not_a_string",
        set_at("tools", "hotel", "headers", "X-Api-Key", 3),
        "tools.hotel.headers.X-Api-Key",
        "expected a string, got 3",
    ),
    # -- capabilities
    (
        "capability_key_without_tool",
        set_at("capabilities", "forecast", {}),
        "capabilities.forecast",
        'expected a key of the form "<tool>.<capability>" (ASCII names), got "forecast"',
    ),
    (
        "capability_of_unknown_tool",
        set_at("capabilities", "wether.forecast", {}),
        'capabilities["wether.forecast"]',
        'names tool "wether", which is not in tools (tools: hotel, weather)',
    ),
    (
        "capability_unknown_field",
        set_at("capabilities", "weather.forecast", "shema", {}),
        'capabilities["weather.forecast"]',
        'unknown field "shema" '
        "(expected one of: description, orchestrator, path, schema, side_effects)",
    ),
    (
        "side_effects_unknown_value",
        set_at("capabilities", "hotel.book", "side_effects", "safe"),
        'capabilities["hotel.book"].side_effects',
        'expected one of "none", "idempotent", "unsafe", got "safe"',
    ),
    (
        "path_without_leading_slash",
        set_at("capabilities", "weather.forecast", "path", "capabilities/forecast"),
        'capabilities["weather.forecast"].path',
        'expected a path starting with "/", got "capabilities/forecast"',
    ),
    (
        "schema_not_an_object",
        set_at("capabilities", "weather.forecast", "schema", ["city"]),
        'capabilities["weather.forecast"].schema',
        "expected a JSON Schema object, got an array",
    ),
    (
        "orchestrator_as_string",
        set_at("capabilities", "hotel.book", "orchestrator", "false"),
        'capabilities["hotel.book"].orchestrator',
        'expected true or false, got "false"',
    ),
    # -- steps: shape and fields
    (
        "steps_not_an_array",
        set_at("steps", {}),
        "steps",
        "expected an array of steps, got an object",
    ),
    ("steps_empty", set_at("steps", []), "steps", "expected at least one step, got an empty array"),
    (
        "step_unknown_field",
        set_at("steps", 1, "paramters", {}),
        "steps[1]",
        f'unknown field "paramters" (expected one of: {STEP_FIELDS})',
    ),
    (
        "step_missing_capability",
        drop_at("steps", 0, "capability"),
        "steps[0]",
        'missing required field "capability"',
    ),
    (
        "step_not_an_object",
        set_at("steps", 1, "step-2"),
        "steps[1]",
        'expected an object, got "step-2"',
    ),
    # -- steps: ids
    (
        "step_id_empty",
        set_at("steps", 0, "id", ""),
        "steps[0].id",
        'expected a non-empty string, got ""',
    ),
    ("step_id_number", set_at("steps", 0, "id", 1), "steps[0].id", "expected a string, got 1"),
    (
        "step_id_with_space",
        set_at("steps", 0, "id", "step 1"),
        "steps[0].id",
        'expected ASCII letters, digits, "_" and "-" only, got "step 1"',
    ),
    (
        "step_id_not_ascii",
        set_at("steps", 0, "id", "stép-1"),
        "steps[0].id",
        'expected ASCII letters, digits, "_" and "-" only, got "stép-1"',
    ),
    (
        "duplicate_step_id",
        set_at("steps", 1, "id", "step-1"),
        "steps[1].id",
        'duplicate step id "step-1" (also steps[0].id)',
    ),
    (
        "step_id_differs_only_in_case",
        set_at("steps", 1, "id", "STEP-1"),
        "steps[1].id",
        'step id "STEP-1" differs from steps[0].id "step-1" only in case, '
        "which bindings cannot tell apart",
    ),
    # -- steps: tool and capability
    (
        "step_unknown_tool",
        set_at("steps", 0, "tool", "wether"),
        "steps[0].tool",
        'names "wether", which is not a tool in this plan (tools: hotel, weather)',
    ),
    (
        "step_unknown_capability",
        set_at("steps", 0, "capability", "forcast"),
        "steps[0].capability",
        'names "forcast", but "weather.forcast" is not in capabilities (weather has: forecast)',
    ),
    (
        "step_capability_of_another_tool",
        set_at("steps", 0, "capability", "search"),
        "steps[0].capability",
        'names "search", but "weather.search" is not in capabilities (weather has: forecast)',
    ),
    # -- steps: parameters, depends_on, hitl_approved, instruction
    (
        "parameters_not_an_object",
        set_at("steps", 0, "parameters", ["Paris"]),
        "steps[0].parameters",
        "expected an object, got an array",
    ),
    # Found by an outside check: accepted, then the step "panicked" at encoding time.
    (
        "parameter_with_a_lone_surrogate",
        set_at("steps", 0, "parameters", {"city": "Par\ud800is"}),
        "steps[0].parameters.city",
        "a lone surrogate U+D800 at [3] is not text (a request body is UTF-8)",
    ),
    (
        "parameter_key_with_a_lone_surrogate",
        set_at("steps", 0, "parameters", {"\udfff": 1}),
        "steps[0].parameters",
        "a lone surrogate U+DFFF at [0] is not text (a request body is UTF-8)",
    ),
    (
        "parameter_too_long_for_json",
        set_at("steps", 0, "parameters", {"n": 10**5000}),
        "steps[0].parameters.n",
        "a number with more than 4300 digits cannot be sent as JSON",
    ),
    (
        "parameter_a_tuple",
        set_at("steps", 0, "parameters", {"pair": (1, 2)}),
        "steps[0].parameters.pair",
        "expected a JSON value, got a Python tuple (a JSON array is a list)",
    ),
    (
        "query_with_a_lone_surrogate",
        set_at("query", "hotel \ud83d"),
        "query",
        "a lone surrogate U+D83D at [6] is not text (a request body is UTF-8)",
    ),
    (
        "depends_on_a_string",
        set_at("steps", 2, "depends_on", "step-2"),
        "steps[2].depends_on",
        'expected an array of strings, got "step-2"',
    ),
    (
        "depends_on_unknown_step",
        set_at("steps", 2, "depends_on", ["step-9"]),
        "steps[2].depends_on[0]",
        'names "step-9", which is not a step in this plan',
    ),
    (
        "depends_on_wrong_case",
        set_at("steps", 2, "depends_on", ["Step-2"]),
        "steps[2].depends_on[0]",
        'names "Step-2", which is not a step in this plan (step ids are case-sensitive: "step-2")',
    ),
    (
        "depends_on_itself",
        set_at("steps", 2, "depends_on", ["step-2", "step-3"]),
        "steps[2].depends_on[1]",
        'names "step-3", this step itself',
    ),
    (
        "depends_on_repeated",
        set_at("steps", 2, "depends_on", ["step-2", "step-1", "step-2"]),
        "steps[2].depends_on[2]",
        '"step-2" is already listed at [0]',
    ),
    (
        "depends_on_non_string",
        set_at("steps", 2, "depends_on", [2]),
        "steps[2].depends_on[0]",
        "expected a string, got 2",
    ),
    (
        "hitl_key_not_in_parameters",
        set_at("steps", 2, "hitl_approved", ["amout"]),
        "steps[2].hitl_approved[0]",
        'names "amout", which is not a key of this step\'s parameters '
        "(parameters: amount, hotel_id, note)",
    ),
    (
        "hitl_key_without_parameters",
        both(set_at("steps", 0, "hitl_approved", ["city"]), drop_at("steps", 0, "parameters")),
        "steps[0].hitl_approved[0]",
        'names "city", which is not a key of this step\'s parameters (parameters: none)',
    ),
    (
        "hitl_approved_not_an_array",
        set_at("steps", 2, "hitl_approved", "amount"),
        "steps[2].hitl_approved",
        'expected an array of strings, got "amount"',
    ),
    (
        "instruction_not_a_string",
        set_at("steps", 2, "instruction", ["book"]),
        "steps[2].instruction",
        "expected a string, got an array",
    ),
    # -- bindings
    (
        "binding_to_unknown_step",
        set_at("steps", 2, "parameters", "amount", "{{step-9.data.x}}"),
        "steps[2].parameters.amount",
        'binds "{{step-9.data.x}}", but step-9 is not a step in this plan',
    ),
    (
        "binding_inside_text_to_unknown_step",
        set_at("steps", 2, "parameters", "note", "rain: {{step-1.data.rain}} / {{step-7.x}}"),
        "steps[2].parameters.note",
        'binds "{{step-7.x}}", but step-7 is not a step in this plan',
    ),
    (
        "binding_in_nested_array",
        set_at("steps", 2, "parameters", "guests", [{"name": "{{step-8.data.name}}"}]),
        "steps[2].parameters.guests[0].name",
        'binds "{{step-8.data.name}}", but step-8 is not a step in this plan',
    ),
    (
        "binding_under_a_key_with_a_space",
        set_at("steps", 2, "parameters", "hotel name", "{{step-9.name}}"),
        'steps[2].parameters["hotel name"]',
        'binds "{{step-9.name}}", but step-9 is not a step in this plan',
    ),
    (
        "binding_to_its_own_step",
        set_at("steps", 2, "parameters", "amount", "{{step-3.data.total}}"),
        "steps[2].parameters.amount",
        'binds "{{step-3.data.total}}", but a step cannot bind its own result',
    ),
    # -- cycles
    (
        "cycle_through_depends_on",
        set_at("steps", 0, "depends_on", ["step-3"]),
        "steps",
        "cycle step-1 -> step-3 -> step-1",
    ),
    (
        "cycle_through_a_binding",
        set_at("steps", 1, "parameters", "city_code", "{{step-3.data.city}}"),
        "steps",
        "cycle step-2 -> step-3 -> step-2",
    ),
    (
        "two_step_cycle",
        both(
            set_at("steps", 1, "depends_on", ["step-1"]),
            set_at("steps", 0, "depends_on", ["step-2"]),
        ),
        "steps",
        "cycle step-1 -> step-2 -> step-1",
    ),
    (
        "cycle_reported_without_the_path_leading_to_it",
        both(
            set_at("steps", 0, "depends_on", ["step-2"]),
            set_at("steps", 1, "depends_on", ["step-3"]),
        ),
        "steps",
        "cycle step-2 -> step-3 -> step-2",
    ),
    # -- config
    (
        "config_unknown_key",
        set_at("config", "max_atempts", 3),
        "config",
        f'unknown field "max_atempts" (expected one of: {ALL_CONFIG_KEYS})',
    ),
    (
        "config_max_attempts_zero",
        set_at("config", "max_attempts", 0),
        "config.max_attempts",
        "expected an integer >= 1, got 0",
    ),
    (
        "config_bool_is_not_an_integer",
        set_at("config", "max_attempts", True),
        "config.max_attempts",
        "expected an integer >= 1, got true",
    ),
    (
        "config_string_number",
        set_at("config", "initial_delay_ms", "500"),
        "config.initial_delay_ms",
        'expected a number of milliseconds >= 0, got "500"',
    ),
    ("config_not_an_object", set_at("config", [1]), "config", "expected an object, got an array"),
    # -- header names and values that no HTTP client can send (issue 8 item 8)
    (
        "header_name_with_cr",
        set_at("tools", "hotel", "headers", {"X-Api\rKey": "demo"}),
        'tools.hotel.headers["X-Api\\rKey"]',
        "expected a header name of ASCII letters, digits and !#$%&'*+-.^_`|~ only, "
        'got "X-Api\\rKey" (a carriage return (CR) at [5])',
    ),
    (
        "header_name_with_lf",
        set_at("tools", "hotel", "headers", {"X-Api-Key\n": "demo"}),
        'tools.hotel.headers["X-Api-Key\\n"]',
        "expected a header name of ASCII letters, digits and !#$%&'*+-.^_`|~ only, "
        'got "X-Api-Key\\n" (a line feed (LF) at [9])',
    ),
    (
        "header_name_with_nul",
        set_at("tools", "hotel", "headers", {"X-Api\0Key": "demo"}),
        'tools.hotel.headers["X-Api\\u0000Key"]',
        "expected a header name of ASCII letters, digits and !#$%&'*+-.^_`|~ only, "
        'got "X-Api\\u0000Key" (a NUL at [5])',
    ),
    (
        "header_name_with_colon",
        set_at("tools", "hotel", "headers", {"X-Api-Key:": "demo"}),
        'tools.hotel.headers["X-Api-Key:"]',
        "expected a header name of ASCII letters, digits and !#$%&'*+-.^_`|~ only, "
        'got "X-Api-Key:" (the character ":" at [9])',
    ),
    (
        "header_name_with_space",
        set_at("tools", "hotel", "headers", {"X Api": "demo"}),
        'tools.hotel.headers["X Api"]',
        "expected a header name of ASCII letters, digits and !#$%&'*+-.^_`|~ only, "
        'got "X Api" (a space at [1])',
    ),
    (
        "header_value_with_crlf",
        set_at("tools", "hotel", "headers", "X-Api-Key", "demo\r\nX-Evil: 1"),
        "tools.hotel.headers.X-Api-Key",
        'expected a header value of printable ASCII, got "demo\\r\\nX-Evil: 1" '
        "(a carriage return (CR) at [4])",
    ),
    (
        "header_value_with_lf",
        set_at("tools", "hotel", "headers", "X-Api-Key", "demo\nmore"),
        "tools.hotel.headers.X-Api-Key",
        'expected a header value of printable ASCII, got "demo\\nmore" (a line feed (LF) at [4])',
    ),
    (
        "header_value_with_nul",
        set_at("tools", "hotel", "headers", "X-Api-Key", "de\0mo"),
        "tools.hotel.headers.X-Api-Key",
        'expected a header value of printable ASCII, got "de\\u0000mo" (a NUL at [2])',
    ),
    (
        "header_value_with_control_character",
        set_at("tools", "hotel", "headers", "X-Api-Key", "de\x01mo"),
        "tools.hotel.headers.X-Api-Key",
        'expected a header value of printable ASCII, got "de\\u0001mo" '
        "(a control character U+0001 at [2])",
    ),
    (
        "header_value_non_ascii",
        set_at("tools", "hotel", "headers", "X-Api-Key", "café"),
        "tools.hotel.headers.X-Api-Key",
        'expected a header value of printable ASCII, got "café" '
        "(a non-ASCII character U+00E9 at [3])",
    ),
    (
        "header_value_leading_space",
        set_at("tools", "hotel", "headers", "X-Api-Key", " demo"),
        "tools.hotel.headers.X-Api-Key",
        'expected a header value of printable ASCII, got " demo" (leading or trailing whitespace)',
    ),
    # -- schema type names and keywords (issue 8 item 8)
    (
        "schema_property_type_typo",
        set_at("capabilities", "weather.forecast", "schema", "properties", "city", "type", "strng"),
        'capabilities["weather.forecast"].schema.properties.city.type',
        'unknown type "strng" (did you mean "string"? expected one of: array, boolean, integer, '
        "null, number, object, string, bool, double, float, float64, int, int32, int64)",
    ),
    (
        "schema_top_level_type_typo",
        set_at("capabilities", "weather.forecast", "schema", "type", "objetc"),
        'capabilities["weather.forecast"].schema.type',
        'unknown type "objetc" (did you mean "object"? expected one of: array, boolean, integer, '
        "null, number, object, string, bool, double, float, float64, int, int32, int64)",
    ),
    (
        "schema_type_list_with_unknown_name",
        set_at("capabilities", "weather.forecast", "schema", "properties", "city", "type",
               ["string", "date"]),
        'capabilities["weather.forecast"].schema.properties.city.type[1]',
        'unknown type "date" (expected one of: array, boolean, integer, null, number, object, '
        "string, bool, double, float, float64, int, int32, int64)",
    ),
    (
        "schema_type_not_a_string",
        set_at("capabilities", "weather.forecast", "schema", "properties", "city", "type", 5),
        'capabilities["weather.forecast"].schema.properties.city.type',
        "expected a type name, got 5",
    ),
    (
        "schema_type_empty_list",
        set_at("capabilities", "weather.forecast", "schema", "properties", "city", "type", []),
        'capabilities["weather.forecast"].schema.properties.city.type',
        "expected a type name or a non-empty array of type names, got an empty array",
    ),
    (
        "schema_items_type_typo",
        set_at("capabilities", "weather.forecast", "schema", "properties", "city",
               {"type": "array", "items": {"type": "intger"}}),
        'capabilities["weather.forecast"].schema.properties.city.items.type',
        'unknown type "intger" (did you mean "integer"? expected one of: array, boolean, '
        "integer, null, number, object, string, bool, double, float, float64, int, int32, int64)",
    ),
    (
        "schema_property_not_an_object",
        set_at("capabilities", "weather.forecast", "schema", "properties", "city", "string"),
        'capabilities["weather.forecast"].schema.properties.city',
        'expected a JSON Schema object, got "string"',
    ),
    (
        "schema_properties_an_array",
        set_at("capabilities", "weather.forecast", "schema", "properties", ["city"]),
        'capabilities["weather.forecast"].schema.properties',
        "expected an object, got an array",
    ),
    (
        "schema_required_a_string",
        set_at("capabilities", "weather.forecast", "schema", "required", "city"),
        'capabilities["weather.forecast"].schema.required',
        'expected an array of property names, got "city"',
    ),
    (
        "schema_enum_a_string",
        set_at("capabilities", "weather.forecast", "schema", "properties", "city", "enum", "PAR"),
        'capabilities["weather.forecast"].schema.properties.city.enum',
        'expected an array of values, got "PAR"',
    ),
    # -- documented maxima (issue 8 item 8)
    (
        "config_max_attempts_10_to_the_30",
        set_at("config", "max_attempts", 10**30),
        "config.max_attempts",
        "expected an integer <= 100 (the documented maximum), got 1000000000000000000000000000000",
    ),
    (
        "config_timeout_above_maximum",
        set_at("config", "timeout_s", 86401),
        "config.timeout_s",
        "expected a number of seconds <= 86400 (the documented maximum), got 86401",
    ),
    (
        "llm_timeout_above_maximum",
        set_at("llm", {"timeout_s": 3601}),
        "llm.timeout_s",
        "expected a number of seconds <= 3600 (the documented maximum), got 3601",
    ),
    (
        "llm_api_key_with_newline",
        set_at("llm", {"api_key": "sk-test\n"}),
        "llm.api_key",
        'expected a key of printable ASCII, got "sk-test\\n" (a line feed (LF) at [7])',
    ),
    # -- llm
    (
        "llm_unknown_field",
        set_at("llm", {"modle": "gpt"}),
        "llm",
        'unknown field "modle" (expected one of: api_key, base_url, model, timeout_s)',
    ),
    (
        "llm_timeout_zero",
        set_at("llm", {"timeout_s": 0}),
        "llm.timeout_s",
        "expected a number of seconds > 0, got 0",
    ),
    (
        "llm_base_url_not_http",
        set_at("llm", {"base_url": "localhost:8200"}),
        "llm.base_url",
        'expected an http:// or https:// URL, got "localhost:8200"',
    ),
    (
        "llm_base_url_port_out_of_range",
        set_at("llm", {"base_url": "http://127.0.0.1:70000/v1"}),
        "llm.base_url",
        'expected a port from 0 to 65535, got "70000" in "http://127.0.0.1:70000/v1"',
    ),
    (
        "llm_model_empty",
        set_at("llm", {"model": ""}),
        "llm.model",
        'expected a non-empty string, got ""',
    ),
    ("llm_a_string", set_at("llm", "gpt-4o"), "llm", 'expected an object, got "gpt-4o"'),
]


def _apply(mutation: Callable[[dict], Any]) -> Any:
    plan = base_plan()
    replaced = mutation(plan)
    return plan if replaced is None else replaced


@pytest.mark.parametrize(
    ("mutation", "path", "problem"),
    [case[1:] for case in BAD_PLANS],
    ids=[case[0] for case in BAD_PLANS],
)
def test_bad_plan_is_refused_with_one_exact_line(
    mutation: Callable[[dict], Any], path: str, problem: str
) -> None:
    with pytest.raises(PlanError) as raised:
        parse_plan(_apply(mutation), "plan.json")
    error = raised.value
    assert (error.file, error.path, error.problem) == ("plan.json", path, problem)
    expected_line = f"plan.json: {path}: {problem}" if path else f"plan.json: {problem}"
    assert str(error) == expected_line
    assert "\n" not in str(error)


def test_bad_plan_cases_have_unique_names() -> None:
    names = [case[0] for case in BAD_PLANS]
    assert len(names) == len(set(names)) >= 25


def test_plan_error_is_a_value_error() -> None:
    assert issubclass(PlanError, ValueError)


def test_non_json_python_values_are_refused() -> None:
    data = base_plan()
    data["steps"][0]["parameters"]["days"] = {1, 2}
    with pytest.raises(PlanError) as raised:
        parse_plan(data, "plan.json")
    assert str(raised.value) == (
        "plan.json: steps[0].parameters.days: expected a JSON value, got a Python set"
    )


def test_parse_plan_names_its_default_source() -> None:
    with pytest.raises(PlanError, match=r"^<plan>: steps: expected at least one step"):
        parse_plan(base_plan() | {"steps": []})


# ---------------------------------------------------------------- bad files


def _write(path: Path, content: bytes | None) -> None:
    if content is not None:
        path.write_bytes(content)


BAD_FILES = [
    ("missing_file", None, "", "cannot read the plan file: No such file or directory"),
    (
        "not_utf8",
        b'{"query": "\xff"}',
        "",
        "not UTF-8 text (invalid byte 0xff at offset 11)",
    ),
    (
        "invalid_json_with_position",
        b'{\n  "query": "x"\n  "tools": {}\n}',
        "",
        "invalid JSON at line 3, column 3: Expecting ',' delimiter",
    ),
    ("empty_file", b"", "", "invalid JSON at line 1, column 1: Expecting value"),
    (
        "nan_is_not_json",
        b'{"query": "x", "config": {"backoff_factor": NaN}}',
        "",
        "invalid JSON: NaN is not a JSON value",
    ),
    (
        "duplicate_top_level_key",
        b'{"steps": [], "query": "x", "steps": []}',
        "",
        'duplicate key "steps"',
    ),
    (
        "duplicate_nested_key",
        b'{"steps": [{"parameters": {"city": "Paris", "city": "Lyon"}}]}',
        "steps[0].parameters",
        'duplicate key "city"',
    ),
    (
        "duplicate_capability_key",
        b'{"capabilities": {"weather.forecast": {}, "weather.forecast": {}}}',
        "capabilities",
        'duplicate key "weather.forecast"',
    ),
    ("top_level_string", b'"plan"', "", 'expected a JSON object at the top level, got "plan"'),
]


@pytest.mark.parametrize(
    ("content", "path", "problem"),
    [case[1:] for case in BAD_FILES],
    ids=[case[0] for case in BAD_FILES],
)
def test_bad_plan_file_is_refused_with_one_exact_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes | None, path: str, problem: str
) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "plan.json", content)
    with pytest.raises(PlanError) as raised:
        load_plan("plan.json")
    assert (raised.value.file, raised.value.path, raised.value.problem) == (
        "plan.json",
        path,
        problem,
    )
    assert str(raised.value) == ": ".join(part for part in ("plan.json", path, problem) if part)


def test_a_directory_is_not_a_plan_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plan.json").mkdir()
    with pytest.raises(PlanError) as raised:
        load_plan("plan.json")
    assert str(raised.value) == "plan.json: cannot read the plan file: is a directory"


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_pipe_or_a_device_is_not_read_as_a_plan(tmp_path: Path, kind: str) -> None:
    # /dev/zero was read until memory ran out (9.5 GB in 12 s, Ctrl-C unheard); a pipe with no
    # writer blocked for ever.
    if kind == "fifo":
        path = tmp_path / "plan.json"
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    with pytest.raises(PlanError) as raised:
        load_plan(path)
    assert str(raised.value) == (
        f"{path}: cannot read the plan file: not a regular file (a device, pipe or socket)"
    )


def test_load_plan_reports_validation_errors_with_the_file_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = base_plan()
    data["steps"][2]["depends_on"] = ["step-9"]
    Path("plan.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(PlanError) as raised:
        load_plan("plan.json")
    assert str(raised.value) == (
        'plan.json: steps[2].depends_on[0]: names "step-9", which is not a step in this plan'
    )


# ---------------------------------------------------------------- docs agree with the code


def _doc_tables() -> dict[str, list[str]]:
    """First-column names of each `<!-- fields: LEVEL -->` or `<!-- config-fields -->` table."""
    tables: dict[str, list[str]] = {}
    current: str | None = None
    for line in PLAN_DOC.read_text(encoding="utf-8").splitlines():
        marker = re.fullmatch(r"<!-- (?:fields: (.+)|(config-fields)) -->", line.strip())
        if marker:
            current = marker.group(1) or marker.group(2)
            tables[current] = []
        elif current is not None and line.startswith("| `"):
            tables[current].append(line)
        elif current is not None and tables[current] and not line.startswith("|"):
            current = None
    return tables


def _first_column(rows: list[str]) -> list[str]:
    return [re.match(r"\| `([^`]+)`", row).group(1) for row in rows]  # type: ignore[union-attr]


@pytest.mark.parametrize("level", sorted(PLAN_FIELDS), ids=sorted(PLAN_FIELDS))
def test_docs_list_exactly_the_fields_of_each_level(level: str) -> None:
    documented = _first_column(_doc_tables().get(level, []))
    assert sorted(documented) == sorted(PLAN_FIELDS[level])


def test_docs_list_every_config_key_with_its_default() -> None:
    rows = _doc_tables()["config-fields"]
    defaults = {
        match.group(1): json.loads(match.group(2))
        for match in (re.match(r"\| `([^`]+)` \| `([^`]+)` \|", row) for row in rows)
        if match is not None
    }
    assert set(defaults) == set(CONFIG_FIELDS)
    resolved = ExecutorConfig()
    assert {key: getattr(resolved, key) for key in defaults} == defaults


def test_docs_list_every_config_maximum() -> None:
    rows = _doc_tables()["config-fields"]
    documented = {
        match.group(1): int(match.group(2))
        for match in (re.match(r"\| `([^`]+)` \| `[^`]+` \| `([0-9]+)` \|", row) for row in rows)
        if match is not None
    }
    assert documented == CONFIG_MAXIMA


def _documented_error_lines() -> list[str]:
    errors_section = PLAN_DOC.read_text(encoding="utf-8").split("## Errors", 1)[1]
    return [line for line in errors_section.splitlines() if line.startswith("plan.json: ")]


def test_documented_error_examples_are_real() -> None:
    """Every example line in the docs' Errors section is the exact output of a case here."""
    produced = {
        ": ".join(part for part in ("plan.json", path, problem) if part)
        for _, _, path, problem in [*BAD_PLANS, *BAD_FILES]
    }
    travel = json.loads((REPO_ROOT / "examples/plans/travel.json").read_text(encoding="utf-8"))
    travel["steps"][2]["hitl_approved"] = ["amout"]
    with pytest.raises(PlanError) as raised:
        parse_plan(travel, "plan.json")
    produced.add(str(raised.value))
    documented = _documented_error_lines()
    assert len(documented) >= 10
    assert [line for line in documented if line not in produced] == []


def test_plan_is_frozen() -> None:
    plan = parse_plan(base_plan())
    with pytest.raises(AttributeError):
        plan.query = "other"  # type: ignore[misc]
    assert isinstance(plan, Plan)


@pytest.mark.parametrize("depth", [900, 5000], ids=["deep_parameters", "deeper_than_json_decoder"])
def test_a_plan_nested_too_deeply_is_one_line_not_a_traceback(tmp_path, depth):
    nested = "[" * depth + "]" * depth
    text = (
        '{"tools": {"t": {"base_url": "http://127.0.0.1:1"}}, "capabilities": {"t.c": {}},'
        ' "steps": [{"id": "step-1", "tool": "t", "capability": "c",'
        f' "parameters": {{"x": {nested}}}}}]}}'
    )
    path = tmp_path / "deep.json"
    path.write_text(text)
    with pytest.raises(PlanError) as caught:
        load_plan(path)
    assert (
        str(caught.value)
        == f"{path}: nested too deeply to be a plan (Python's recursion limit was reached)"
    )


@pytest.mark.parametrize("size", [10, 1000])
def test_dependency_lookups_build_the_id_map_a_fixed_number_of_times(
    size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12: `dependencies_of` rebuilt a dict of every step id per call (quadratic)."""
    from executor.plan import model, validation

    calls = []
    real = model.case_folded_ids
    for module in (model, validation):
        monkeypatch.setattr(module, "case_folded_ids", lambda ids: calls.append(1) or real(ids))
    data = base_plan()
    data["steps"] = [
        {"id": f"step-{i}", "tool": "weather", "capability": "forecast",
         "parameters": {"city": f"{{{{step-{i - 1}.data.city}}}}" if i else "Paris"},
         "depends_on": [f"step-{i - 1}"] if i else []}
        for i in range(size)
    ]
    plan = parse_plan(data)
    for step_id in plan.step_ids:
        plan.dependencies_of(step_id)
        plan.dependents_of(step_id)
        plan.step(step_id)
    assert plan.topological_order() == plan.step_ids
    assert plan.dependents_of("step-0") == (("step-1",) if size > 1 else ())
    assert len(calls) == 2  # once to validate, once to build the Plan


def test_dependents_are_in_plan_order() -> None:
    plan = parse_plan(base_plan())
    assert plan.dependents_of("step-1") == ("step-3",)
    assert plan.dependents_of("step-2") == ("step-3",)
    assert plan.dependents_of("step-3") == ()
