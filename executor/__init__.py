"""truva-console executor: a faithful Python port of the TruvaG3 error-handling policy.

Headless: it imports no Textual, Rich or DuckDB. Modules and packages: `wire` (envelope,
classification), `redact` (the levels), `backoff`, `config`, `params` (coercion, bindings,
guard), `policy` (`decide()`, `redecide()`), `llm` (layers 3 and 4), `plan`, `runtime` (the
step loop), `resilience`, `events`, `eventlog` (the event codec), `jsonform`, `telemetry`, and
`api`, whose names are the public API below (docs/library.md); they are imported on first use,
so importing a submodule stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from executor.lazy import lazy_attributes

__version__ = "0.1.0"

# Public name -> the module that defines it. tests/unit/test_public_api.py pins this list.
_PUBLIC = {
    "LLM": "executor.api",
    "Capability": "executor.api",
    "Plan": "executor.api",
    "Step": "executor.api",
    "Tool": "executor.api",
    "ToolCallCancelled": "executor.api",
    "ToolCallError": "executor.api",
    "ToolCallFailed": "executor.api",
    "ToolCallRejected": "executor.api",
    "call_tool": "executor.api",
    "record_runs": "executor.api",
    "run_labels": "executor.api",
    "run_plan": "executor.api",
    "run_plan_sync": "executor.api",
    "PlanError": "executor.plan",
    "AttemptSummary": "executor.runtime",
    "ExecutionOutcome": "executor.runtime",
    "StepOutcome": "executor.runtime",
    "Action": "executor.policy",
    "Decision": "executor.policy",
    "Event": "executor.events",
    "FanoutRecorder": "executor.events",
    "ListRecorder": "executor.events",
    "Recorder": "executor.events",
}

__all__ = [
    "LLM",
    "Action",
    "AttemptSummary",
    "Capability",
    "Decision",
    "Event",
    "ExecutionOutcome",
    "FanoutRecorder",
    "ListRecorder",
    "Plan",
    "PlanError",
    "Recorder",
    "Step",
    "StepOutcome",
    "Tool",
    "ToolCallCancelled",
    "ToolCallError",
    "ToolCallFailed",
    "ToolCallRejected",
    "__version__",
    "call_tool",
    "record_runs",
    "run_labels",
    "run_plan",
    "run_plan_sync",
]

if TYPE_CHECKING:
    from executor.api import (
        LLM,
        Capability,
        Plan,
        Step,
        Tool,
        ToolCallCancelled,
        ToolCallError,
        ToolCallFailed,
        ToolCallRejected,
        call_tool,
        record_runs,
        run_labels,
        run_plan,
        run_plan_sync,
    )
    from executor.events import Event, FanoutRecorder, ListRecorder, Recorder
    from executor.plan import PlanError
    from executor.policy import Action, Decision
    from executor.runtime import AttemptSummary, ExecutionOutcome, StepOutcome


__getattr__ = lazy_attributes("executor", _PUBLIC, globals())
