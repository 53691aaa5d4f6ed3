"""Semantic versioning of the public API: each public module's `__all__`, pinned and announced.

A change to an `__all__` fails here until PUBLIC_API and CHANGELOG.md both say it: add the
name to the version's section of the changelog (and bump the version when a name goes away).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import executor

REPO_ROOT = Path(__file__).resolve().parents[2]
CHANGELOG = REPO_ROOT / "CHANGELOG.md"

PUBLIC_API: dict[str, tuple[str, ...]] = {
    "executor": (
        "LLM", "Action", "AttemptSummary", "Capability", "Decision", "Event", "ExecutionOutcome",
        "FanoutRecorder", "ListRecorder", "Plan", "PlanError", "Recorder", "Step", "StepOutcome",
        "Tool", "ToolCallCancelled", "ToolCallError", "ToolCallFailed", "ToolCallRejected",
        "__version__", "call_tool", "record_runs", "run_labels", "run_plan", "run_plan_sync",
    ),
    "executor.api": (
        "LLM", "Capability", "Plan", "Step", "Tool", "ToolCallCancelled", "ToolCallError",
        "ToolCallFailed", "ToolCallRejected", "call_tool", "record_runs", "run_labels",
        "run_plan", "run_plan_sync",
    ),
    "store": (
        "AttemptRecord", "EventRecord", "ExecutionDetail", "ExecutionFilter", "ExecutionRow",
        "LLMCallRecord", "Recording", "StepRecord", "Store", "StoreError", "StoreRecorder",
        "open_store",
    ),
    "store.recording": ("Recording",),
}  # fmt: skip


@pytest.mark.parametrize("module_name", sorted(PUBLIC_API))
def test_all_is_the_announced_public_api(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert tuple(module.__all__) == PUBLIC_API[module_name], (
        f"{module_name}.__all__ changed: announce it in CHANGELOG.md and update PUBLIC_API"
    )


@pytest.mark.parametrize("module_name", sorted(PUBLIC_API))
def test_every_public_name_resolves_and_is_documented(module_name: str) -> None:
    module = importlib.import_module(module_name)
    for name in module.__all__:
        value = getattr(module, name)
        if name != "__version__":
            assert (value.__doc__ or "").strip(), f"{module_name}.{name} has no docstring"


def test_the_changelog_announces_every_public_name_of_this_version() -> None:
    text = CHANGELOG.read_text(encoding="utf-8")
    versions = re.findall(r"^## (\d+\.\d+\.\d+)", text, flags=re.MULTILINE)
    assert versions and versions[0] == executor.__version__
    pyproject = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'version = "{executor.__version__}"' in pyproject
    announced = set(re.findall(r"`(\w+)`", text))
    names = {name for names in PUBLIC_API.values() for name in names} - {"__version__"}
    assert sorted(names - announced) == []


def test_the_packages_are_typed() -> None:
    for package in ("executor", "store"):
        assert (REPO_ROOT / package / "py.typed").is_file()
