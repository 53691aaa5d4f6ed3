"""The executor runtime: runs a plan's steps over real HTTP and acts on `policy.decide()`.

Ready steps run concurrently (bounded); each step's loop dispatches, records what came back,
asks the policy, consults LLM layers when the policy says so, waits out backoffs (cancellable
at once), and reports every event to the injected recorder. It writes nothing to disk itself.
"""

from executor.runtime.outcomes import (
    STEP_FAILED,
    STEP_REJECTED,
    STEP_SKIPPED,
    STEP_SUCCEEDED,
    AttemptSummary,
    ExecutionOutcome,
    HttpOutcome,
    Sleep,
    StepOutcome,
    classify_transport_error,
    encode_json_body,
    new_execution_id,
)
from executor.runtime.plan_executor import PlanExecutor, run_plan

__all__ = [
    "STEP_FAILED",
    "STEP_REJECTED",
    "STEP_SKIPPED",
    "STEP_SUCCEEDED",
    "AttemptSummary",
    "ExecutionOutcome",
    "HttpOutcome",
    "PlanExecutor",
    "Sleep",
    "StepOutcome",
    "classify_transport_error",
    "encode_json_body",
    "new_execution_id",
    "run_plan",
]
