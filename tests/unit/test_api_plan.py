"""Plans built in code: each bad builder fails with the plan file's exact one-line message."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from executor import LLM, Capability, Plan, PlanError, Step, Tool
from executor.plan import load_plan, parse_plan

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_PLANS = sorted((REPO_ROOT / "examples" / "plans").glob("*.json"))

WEATHER = Tool("weather", "http://127.0.0.1:8101")
FORECAST = Capability(WEATHER, "forecast",
                      schema={"type": "object", "properties": {"city": {"type": "string"}}})


def base_document() -> dict[str, Any]:
    """The plan-file twin of `base_steps()`."""
    return {
        "query": "",
        "tools": {"weather": {"base_url": "http://127.0.0.1:8101"}},
        "capabilities": {"weather.forecast": {
            "schema": {"type": "object", "properties": {"city": {"type": "string"}}}}},
        "steps": [
            {"id": "step-1", "tool": "weather", "capability": "forecast",
             "parameters": {"city": "Paris"}},
            {"id": "step-2", "tool": "weather", "capability": "forecast",
             "parameters": {"city": "Oslo"}, "depends_on": ["step-1"]},
        ],
    }  # fmt: skip


def base_steps() -> list[Step]:
    first = Step("step-1", FORECAST, {"city": "Paris"})
    return [first, Step("step-2", FORECAST, {"city": "Oslo"}, depends_on=[first])]


def edit(document: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    change(changed)
    return changed


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        target = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


# (id, builder that must fail, the same mistake in a plan file, the one message both give)
CASES: list[tuple[str, Callable[[], Any], Callable[[dict[str, Any]], None], str]] = [
    ("tool-url-not-http",
     lambda: Tool("weather", "ftp://127.0.0.1"),
     _set(("tools", "weather", "base_url"), "ftp://127.0.0.1"),
     '<plan>: tools.weather.base_url: expected an http:// or https:// URL, got "ftp://127.0.0.1"'),
    ("tool-header-value-with-lf",
     lambda: Tool("weather", "http://127.0.0.1:8101", {"X-Key": "a\nb"}),
     _set(("tools", "weather", "headers"), {"X-Key": "a\nb"}),
     "<plan>: tools.weather.headers.X-Key: "),
    ("tool-name-with-space",
     lambda: Tool("my tool", "http://127.0.0.1:8101"),
     lambda d: d["tools"].update({"my tool": d["tools"].pop("weather")}),
     '<plan>: tools["my tool"]: expected a tool name of ASCII letters, digits, "_" and "-", '
     'got "my tool"'),
    ("schema-type-typo",
     lambda: Capability(WEATHER, "forecast", schema={"type": "strng"}),
     _set(("capabilities", "weather.forecast", "schema"), {"type": "strng"}),
     "<plan>: capabilities[\"weather.forecast\"].schema.type: "),
    ("side-effects-unknown",
     lambda: Capability(WEATHER, "forecast", side_effects="sometimes"),
     _set(("capabilities", "weather.forecast", "side_effects"), "sometimes"),
     '<plan>: capabilities["weather.forecast"].side_effects: expected one of "none", "idempotent", '
     '"unsafe", got "sometimes"'),
    ("path-without-slash",
     lambda: Capability(WEATHER, "forecast", path="forecast"),
     _set(("capabilities", "weather.forecast", "path"), "forecast"),
     '<plan>: capabilities["weather.forecast"].path: expected a path starting with "/", '
     'got "forecast"'),
    ("step-id-with-space",
     lambda: Plan([Step("step 1", FORECAST, {"city": "Paris"})]),
     lambda d: d.update(steps=[{**d["steps"][0], "id": "step 1"}]),
     '<plan>: steps[0].id: expected ASCII letters, digits, "_" and "-" only, got "step 1"'),
    ("duplicate-step-id",
     lambda: Plan([Step("step-1", FORECAST), Step("step-1", FORECAST)]),
     lambda d: d.update(steps=[d["steps"][0], {**d["steps"][0]}]),
     '<plan>: steps[1].id: duplicate step id "step-1" (also steps[0].id)'),
    ("depends-on-unknown-step",
     lambda: Plan([Step("step-1", FORECAST, depends_on=["step-9"])]),
     lambda d: d.update(steps=[{**d["steps"][0], "depends_on": ["step-9"]}]),
     '<plan>: steps[0].depends_on[0]: names "step-9", which is not a step in this plan'),
    ("binding-to-unknown-step",
     lambda: Plan([Step("step-1", FORECAST, {"city": "{{step-9.data.city}}"})]),
     _set(("steps", 0, "parameters"), {"city": "{{step-9.data.city}}"}),
     '<plan>: steps[0].parameters.city: binds "{{step-9.data.city}}", but step-9 is not a step '
     "in this plan"),
    ("dependency-cycle",
     lambda: Plan([Step("step-1", FORECAST, depends_on=["step-2"]),
                   Step("step-2", FORECAST, depends_on=["step-1"])]),
     _set(("steps", 0, "depends_on"), ["step-2"]),
     "<plan>: steps: cycle step-1 -> step-2 -> step-1"),
    ("hitl-key-not-a-parameter",
     lambda: Plan([Step("step-1", FORECAST, {"city": "Paris"}, hitl_approved=["cty"])]),
     _set(("steps", 0, "hitl_approved"), ["cty"]),
     '<plan>: steps[0].hitl_approved[0]: names "cty", which is not a key of this step\'s '
     "parameters (parameters: city)"),
    ("config-out-of-range",
     lambda: Plan(base_steps(), config={"max_attempts": 0}),
     lambda d: d.update(config={"max_attempts": 0}),
     "<plan>: config.max_attempts: expected an integer >= 1, got 0"),
    ("config-unknown-field",
     lambda: Plan(base_steps(), config={"max_atempts": 2}),
     lambda d: d.update(config={"max_atempts": 2}),
     '<plan>: config: unknown field "max_atempts" (expected one of: '),
    ("llm-timeout-negative",
     lambda: LLM(base_url="http://127.0.0.1:9/v1", timeout_s=-1),
     lambda d: d.update(llm={"base_url": "http://127.0.0.1:9/v1", "timeout_s": -1}),
     "<plan>: llm.timeout_s: expected a number of seconds > 0, got -1"),
    # A value of the wrong type is named as in a file, not dict()'s "dictionary update sequence
    # element #0" or a check of the letters of a string (found by an outside check).
    ("parameters-not-an-object",
     lambda: Plan([Step("step-1", FORECAST, ["Paris"])]),
     _set(("steps", 0, "parameters"), ["Paris"]),
     "<plan>: steps[0].parameters: expected an object, got an array"),
    ("hitl-approved-a-string",
     lambda: Plan([Step("step-1", FORECAST, {"city": "Paris"}, hitl_approved="city")]),
     _set(("steps", 0, "hitl_approved"), "city"),
     '<plan>: steps[0].hitl_approved: expected an array of strings, got "city"'),
    ("depends-on-a-string",
     lambda: Plan([Step("step-1", FORECAST), Step("step-2", FORECAST, depends_on="step-1")]),
     lambda d: d.update(steps=[d["steps"][0], {**d["steps"][1], "depends_on": "step-1"}]),
     '<plan>: steps[1].depends_on: expected an array of strings, got "step-1"'),
    ("tool-headers-a-string",
     lambda: Tool("weather", "http://127.0.0.1:8101", headers="X-Key: 1"),
     _set(("tools", "weather", "headers"), "X-Key: 1"),
     '<plan>: tools.weather.headers: expected an object, got "X-Key: 1"'),
    ("schema-an-array",
     lambda: Capability(WEATHER, "forecast", schema=[{"type": "object"}]),
     _set(("capabilities", "weather.forecast", "schema"), [{"type": "object"}]),
     '<plan>: capabilities["weather.forecast"].schema: expected a JSON Schema object, got an '
     "array"),
    ("config-a-string",
     lambda: Plan(base_steps(), config="max_attempts=2"),
     lambda d: d.update(config="max_attempts=2"),
     '<plan>: config: expected an object, got "max_attempts=2"'),
    ("steps-a-string",
     lambda: Plan("step-1"),
     lambda d: d.update(steps="step-1"),
     '<plan>: steps: expected an array of steps, got "step-1"'),
    ("no-steps",
     lambda: Plan([]),
     lambda d: d.update(steps=[]),
     "<plan>: steps: expected at least one step, got an empty array"),
]  # fmt: skip


@pytest.mark.parametrize(("build", "change", "message"), [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])  # fmt: skip
def test_a_bad_builder_fails_as_the_plan_file_does(
    build: Callable[[], Any], change: Callable[[dict[str, Any]], None], message: str
) -> None:
    with pytest.raises(PlanError) as from_code:
        build()
    with pytest.raises(PlanError) as from_file:
        parse_plan(edit(base_document(), change))
    assert str(from_code.value) == str(from_file.value)
    assert str(from_code.value).startswith(message)
    assert "\n" not in str(from_code.value)


def test_two_different_tools_under_one_name_are_refused() -> None:
    other = Capability(Tool("weather", "http://127.0.0.1:9999"), "forecast")
    with pytest.raises(PlanError, match=r"^<plan>: tools\.weather: two different tools are "
                                        r"named 'weather'"):  # fmt: skip
        Plan([Step("step-1", FORECAST), Step("step-2", other)])


def test_a_built_plan_is_the_plan_file_it_spells() -> None:
    plan = Plan(base_steps())
    assert plan.to_dict() == parse_plan(base_document()).to_dict()
    assert plan.spec.dependencies_of("step-2") == ("step-1",)


@pytest.mark.parametrize("path", EXAMPLE_PLANS, ids=[p.stem for p in EXAMPLE_PLANS])
def test_from_file_and_to_dict_round_trip_the_example_plans(path: Path) -> None:
    plan = Plan.from_file(path)
    assert plan.to_dict() == load_plan(path).to_dict()
    assert plan.spec.source_path == str(path)
    assert Plan.from_dict(plan.to_dict()).to_dict() == plan.to_dict()


def test_from_file_reports_a_bad_file_as_load_plan_does(tmp_path: Path) -> None:
    bad = tmp_path / "plan.json"
    bad.write_text('{"tools": {}, "capabilities": {}, "steps": [], "paramters": 1}')
    with pytest.raises(PlanError) as raised:
        Plan.from_file(bad)
    assert str(raised.value) == (
        f'{bad}: unknown field "paramters" (expected one of: capabilities, config, llm, query, '
        "steps, tools)")


@pytest.mark.parametrize(
    ("capabilities", "message"),
    [
        (FORECAST, "<plan>: capabilities: expected an array of Capability, got a Capability"),
        ("abc", '<plan>: capabilities: expected an array of Capability, got "abc"'),
        (None, "<plan>: capabilities: expected an array of Capability, got null"),
        ([FORECAST, "y"], '<plan>: capabilities[1]: expected a Capability, got "y"'),
        ([Step("step-9", FORECAST)], "<plan>: capabilities[0]: expected a Capability, got a Step"),
    ],
    ids=["one-capability", "a-string", "none", "a-string-item", "a-step-item"],
)
def test_capabilities_of_the_wrong_type_are_one_line(capabilities, message):
    # Were "'Capability' object is not iterable" and "'str' object has no attribute 'tool'"
    # tracebacks (found by review).
    with pytest.raises(PlanError) as raised:
        Plan(base_steps(), capabilities=capabilities)
    assert str(raised.value) == message


def test_capabilities_no_step_uses_are_kept():
    spare = Capability(WEATHER, "history")
    plan = Plan(base_steps(), capabilities=[spare])
    assert plan.capabilities == (spare,)
    assert "weather.history" in plan.to_dict()["capabilities"]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Plan([Step("step-1", None)]),
         "<plan>: steps[0].capability: expected a Capability (tool.capability(name)), got null"),
        (lambda: Plan([Step("step-1", FORECAST), Step("step-2", "weather.forecast")]),
         '<plan>: steps[1].capability: expected a Capability (tool.capability(name)), got '
         '"weather.forecast"'),
        (lambda: Capability(None, "forecast"),
         "<plan>: capabilities.forecast.tool: expected a Tool, got null"),
        (lambda: Capability("weather", "forecast"),
         '<plan>: capabilities.forecast.tool: expected a Tool, got "weather"'),
        (lambda: Plan([Step("step-1", FORECAST, {"days": (1, 2)})]),
         "<plan>: steps[0].parameters.days: expected a JSON value, got a Python tuple (a JSON "
         "array is a list)"),
        (lambda: Plan([Step("step-1", FORECAST, {"days": 10**5000})]),
         "<plan>: steps[0].parameters.days: a number with more than 4300 digits cannot be sent "
         "as JSON"),
        (lambda: Plan([Step("step-1", FORECAST, {"city": "\ud800"})]),
         "<plan>: steps[0].parameters.city: a lone surrogate U+D800 at [0] is not text (a "
         "request body is UTF-8)"),
    ],
    ids=["step-without-capability", "step-with-a-capability-key", "capability-without-tool",
         "capability-with-a-tool-name", "tuple-parameter", "huge-integer", "lone-surrogate"],
)
def test_builder_values_of_the_wrong_type_are_one_plan_error(build, message):
    # Were AttributeError tracebacks, and values accepted that the step then could not send
    # ("step step-1 execution panic: UnicodeEncodeError"), found by an outside check.
    with pytest.raises(PlanError) as raised:
        build()
    assert str(raised.value) == message
