"""The store's value lists follow the executor's enums; records change one step at a time."""

from dataclasses import MISSING, fields
from typing import Any

import pytest

from executor.policy import INTERMEDIATE_ACTIONS, Action
from store.errors import StepNotFoundError
from store.queries import ACTIONS, EXECUTION_STATUSES
from store.records import (
    FINISHED_EXECUTION_STATUSES,
    ExecutionDetail,
    ExecutionRow,
    StepRecord,
    detail_with_step,
)


def test_listed_actions_are_every_final_policy_action_and_no_intermediate_one() -> None:
    assert set(ACTIONS) == {str(action) for action in Action} - {
        str(action) for action in INTERMEDIATE_ACTIONS
    }
    assert "dispatch" not in ACTIONS and "ask_analyzer" not in ACTIONS
    assert ACTIONS[:2] == ("reject_predispatch", "success")


def test_finished_statuses_are_every_execution_status_but_running() -> None:
    assert set(EXECUTION_STATUSES) - {"running"} == FINISHED_EXECUTION_STATUSES
    assert "interrupted" in FINISHED_EXECUTION_STATUSES


def _step(step_id: str, status: str = "succeeded") -> StepRecord:
    names = {item.name for item in fields(StepRecord)} - {"attempts", "events", "llm_calls"}
    values: dict[str, Any] = dict.fromkeys(names)
    return StepRecord(**{**values, "step_id": step_id, "depends_on": (), "status": status})


def _detail(*steps: StepRecord) -> ExecutionDetail:
    row_names = {item.name for item in fields(ExecutionRow) if item.default is MISSING}
    row = ExecutionRow(**{**dict.fromkeys(row_names), "execution_id": "exec-1"})
    return ExecutionDetail(execution=row, plan=None, config=None, config_sources=None, llm=None,
                           steps=steps, events=())  # fmt: skip


def test_detail_with_step_replaces_the_step_of_that_id_and_keeps_the_order() -> None:
    detail = _detail(_step("fetch"), _step("charge", "failed"), _step("notify"))
    changed = detail_with_step(detail, _step("charge", "succeeded"))
    assert [(step.step_id, step.status) for step in changed.steps] == [
        ("fetch", "succeeded"), ("charge", "succeeded"), ("notify", "succeeded"),
    ]  # fmt: skip
    assert changed.steps[0] is detail.steps[0] and detail.steps[1].status == "failed"


def test_detail_with_step_refuses_a_step_the_execution_does_not_have() -> None:
    detail = _detail(_step("fetch"))
    with pytest.raises(StepNotFoundError, match=r"execution exec-1 has no step 'charge' "
                                                r"\(steps: fetch\)"):  # fmt: skip
        detail_with_step(detail, _step("charge"))
