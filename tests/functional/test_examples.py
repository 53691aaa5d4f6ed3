"""`examples/plans/*.json` run against the demo services, on the ports `demo serve` uses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.demo import start_demo_services
from console.demo.ports import DEFAULT_BASE_PORT
from console.demo.runner import DemoEndpoints, DemoServices
from tests.support.plans import run_subprocess

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plans"

# example -> (execution status, {step: (step status, rule id of every attempt in order)})
EXPECTED: dict[str, tuple[str, dict[str, tuple[str, list[str]]]]] = {
    "minimal": ("succeeded", {"step-1": ("succeeded", ["success.2xx"])}),
    "travel": ("partial", {
        "step-1": ("succeeded", ["success.2xx"]),
        "step-2": ("succeeded", ["success.2xx"]),
        "step-3": ("failed", ["side_effects.unsafe_resend"]),
    }),
    "with-llm": ("succeeded", {
        "step-1": ("succeeded", ["transient.retry_same", "success.2xx"]),
        "step-2": ("succeeded", ["re_resolution.accept", "success.2xx"]),
    }),
}  # fmt: skip


@pytest.fixture(scope="module")
def services() -> Iterator[DemoServices]:
    """The demo tools and LLM on free ports (the documented ports may be busy on a CI host)."""
    with start_demo_services() as running:
        yield running


def _on_live_ports(document: dict[str, Any], services: DemoServices) -> dict[str, Any]:
    """The example with `demo serve`'s default URLs replaced by the live ones.

    Fails when an example names a URL that `demo serve` (default base port) does not serve.
    """
    documented = DemoEndpoints.for_base_port(DEFAULT_BASE_PORT)
    for name, tool in document["tools"].items():
        assert tool["base_url"] == documented.tools_base_urls.get(name), (
            f"tools.{name}.base_url is not where `truva-console demo serve` serves {name}"
        )
        tool["base_url"] = services.tools_base_urls[name]
    if "llm" in document:
        assert document["llm"]["base_url"] == documented.llm_base_url
        document["llm"]["base_url"] = services.llm_base_url
    return document


def test_every_example_has_an_expectation() -> None:
    assert sorted(path.stem for path in EXAMPLES.glob("*.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs_against_demo_serve(
    name: str, services: DemoServices, tmp_path: Path
) -> None:
    document = json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    plan = tmp_path / f"{name}.json"
    plan.write_text(json.dumps(_on_live_ports(document, services)), encoding="utf-8")

    result = run_subprocess("run", str(plan), "--json", "--db", str(tmp_path / "debug.duckdb"))

    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    status, steps = EXPECTED[name]
    got = {
        step["id"]: (step["status"], [attempt["rule"] for attempt in step["attempts"]])
        for step in outcome["steps"]
    }
    assert (outcome["status"], got) == (status, steps)
    assert "has no capability" not in result.stdout
