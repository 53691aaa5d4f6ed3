"""Re-runs a recorded execution's plan, reusing the results of the steps that succeeded.

Seed 003: "the runtime retries only the failed item". A re-run is a new execution of the
recorded plan, linked to the original by `rerun_of`. Steps that succeeded are not resent: their
recorded results are seeded into the executor and their dependents bind to that data. Failed,
rejected, skipped and unfinished steps run again, except a step that stopped with
`stop_unsafe_resend` (its request may have been accepted), unless `include_unsafe`.
docs/run.md describes the choices.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from console.replay.setup import recorded_config
from executor.config import ExecutorConfig
from executor.events import Recorder
from executor.plan import Plan, PlanError, load_plan, parse_plan
from executor.runtime import PlanExecutor
from store.queries import ExecutionDetail

__all__ = ["RerunError", "RerunSetup", "prepare_rerun", "rerun_executor", "unsafe_hold_reason"]

_REDACTED = "[REDACTED]"
UNSAFE_ACTION = "stop_unsafe_resend"
REUSED_STATUS = "succeeded"


class RerunError(ValueError):
    """An execution that cannot be re-run (still running, no plan, nothing to do); one line."""


@dataclass(frozen=True, slots=True)
class RerunSetup:
    """What a re-run needs: the plan, the recorded config, and which steps it reuses or holds.

    `reuse_results` maps each step that succeeded originally to its recorded (parsed) result;
    `skip_steps` maps each held unsafe step to the reason it is not sent again; `rerun_steps`
    are the steps that run. `notes` are one-line remarks for stderr.
    """

    execution_id: str
    plan: Plan
    config: ExecutorConfig
    reuse_results: Mapping[str, Any]
    skip_steps: Mapping[str, str]
    rerun_steps: tuple[str, ...]
    notes: tuple[str, ...] = ()


def unsafe_hold_reason(execution_id: str) -> str:
    """Why a step that stopped with `stop_unsafe_resend` is not sent again."""
    return (
        f"not re-run: it stopped with {UNSAFE_ACTION} in execution {execution_id}, so the "
        "tool may have accepted the request; pass --include-unsafe to send it again"
    )


def prepare_rerun(detail: ExecutionDetail, *, include_unsafe: bool = False) -> RerunSetup:
    """Decide what a re-run of the recorded execution does; RerunError when it cannot run.

    Reads `detail` and, only when the plan snapshot has redacted secrets, the original plan
    file (used when it still matches the snapshot).
    """
    execution_id = detail.execution.execution_id
    if detail.execution.status == "running":
        raise RerunError(
            f"execution {execution_id} is still running; re-run it once it has finished"
        )
    if not isinstance(detail.plan, dict):
        raise RerunError(
            f"execution {execution_id} has no plan snapshot recorded; it cannot be re-run"
        )
    notes: list[str] = []
    plan = _recorded_plan(detail, notes)
    config = recorded_config(detail, plan, {}, notes)
    recorded = {step.step_id: step for step in detail.steps}
    reuse: dict[str, Any] = {}
    hold: dict[str, str] = {}
    for step in plan.steps:
        record = recorded.get(step.id)
        if record is not None and record.status == REUSED_STATUS:
            reuse[step.id] = record.result
        elif record is not None and record.final_action == UNSAFE_ACTION and not include_unsafe:
            hold[step.id] = unsafe_hold_reason(execution_id)
    rerun = tuple(step.id for step in plan.steps if step.id not in reuse and step.id not in hold)
    if not rerun:
        if hold:
            raise RerunError(
                f"execution {execution_id}: nothing to re-run; {', '.join(hold)} stopped with "
                f"{UNSAFE_ACTION} (pass --include-unsafe to send it again)"
            )
        raise RerunError(
            f"execution {execution_id}: nothing to re-run; every step succeeded"
        )
    return RerunSetup(
        execution_id=execution_id,
        plan=plan,
        config=config,
        reuse_results=reuse,
        skip_steps=hold,
        rerun_steps=rerun,
        notes=tuple(notes),
    )


def rerun_executor(
    setup: RerunSetup, recorder: Recorder, *, env: Mapping[str, str] | None = None
) -> PlanExecutor:
    """The executor that runs `setup` as a new execution reporting to `recorder`."""
    return PlanExecutor(
        setup.plan,
        recorder=recorder,
        env=env,
        config=setup.config,
        reuse_results=setup.reuse_results,
        skip_steps=setup.skip_steps,
        rerun_of=setup.execution_id,
    )


# ---------------------------------------------------------------------------------------------
# The plan: the snapshot, with secrets from the original file when they were redacted
# ---------------------------------------------------------------------------------------------


def _recorded_plan(detail: ExecutionDetail, notes: list[str]) -> Plan:
    execution_id = detail.execution.execution_id
    snapshot: dict[str, Any] = dict(detail.plan)
    plan_path = detail.execution.plan_path
    redacted = list(_redacted_paths(snapshot))
    if redacted:
        from_file = _matching_plan_file(plan_path, snapshot)
        if from_file is not None:
            notes.append(
                f"the recorded plan has redacted secrets; they were taken from {plan_path}, "
                "which still matches it"
            )
            return from_file
        llm_key = [path for path in redacted if path == "llm.api_key"]
        if llm_key and len(llm_key) == len(redacted):
            snapshot["llm"] = {k: v for k, v in snapshot["llm"].items() if k != "api_key"}
            notes.append("the recorded llm.api_key is redacted; OPENAI_API_KEY supplies the key")
        else:
            where = f" and {plan_path} is missing or differs" if plan_path else ""
            raise RerunError(
                f"execution {execution_id}: the recorded plan has redacted secrets at "
                f"{', '.join(redacted)}{where}; it cannot be re-run without them"
            )
    try:
        plan = parse_plan(snapshot, source=f"execution {execution_id} plan snapshot")
    except PlanError as error:
        raise RerunError(f"{error} (the recorded plan cannot be rebuilt)") from error
    return replace(plan, source_path=plan_path)


def _redacted_paths(value: Any, path: str = "") -> list[str]:
    """Dotted paths of every string in `value` that holds a redaction mark."""
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _redacted_paths(item, _dot(path, key))]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _redacted_paths(item, f"{path}[{i}]")]
    return [path] if isinstance(value, str) and _REDACTED in value else []


def _dot(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _matching_plan_file(plan_path: str | None, snapshot: dict[str, Any]) -> Plan | None:
    """The plan file at `plan_path` when, redactions aside, it is the recorded plan."""
    if not plan_path or not Path(plan_path).is_file():
        return None
    try:
        plan = load_plan(plan_path)
    except PlanError:
        return None
    return plan if _matches(snapshot, plan.to_dict()) else None


def _matches(recorded: Any, actual: Any) -> bool:
    """Equal, where a recorded string's `[REDACTED]` parts stand for any text."""
    if isinstance(recorded, dict):
        return (
            isinstance(actual, dict)
            and recorded.keys() == actual.keys()
            and all(_matches(recorded[key], actual[key]) for key in recorded)
        )
    if isinstance(recorded, list):
        return (
            isinstance(actual, list)
            and len(recorded) == len(actual)
            and all(_matches(r, a) for r, a in zip(recorded, actual, strict=True))
        )
    if isinstance(recorded, str) and _REDACTED in recorded and isinstance(actual, str):
        pattern = ".*".join(re.escape(part) for part in recorded.split(_REDACTED))
        return re.fullmatch(pattern, actual, re.DOTALL) is not None
    return recorded == actual
