"""The store's value lists follow the executor's enums."""

from executor.policy import INTERMEDIATE_ACTIONS, Action
from store.queries import ACTIONS, EXECUTION_STATUSES
from store.records import FINISHED_EXECUTION_STATUSES


def test_listed_actions_are_every_final_policy_action_and_no_intermediate_one() -> None:
    assert set(ACTIONS) == {str(action) for action in Action} - {
        str(action) for action in INTERMEDIATE_ACTIONS
    }
    assert "dispatch" not in ACTIONS and "ask_analyzer" not in ACTIONS
    assert ACTIONS[:2] == ("reject_predispatch", "success")


def test_finished_statuses_are_every_execution_status_but_running() -> None:
    assert set(EXECUTION_STATUSES) - {"running"} == FINISHED_EXECUTION_STATUSES
    assert "interrupted" in FINISHED_EXECUTION_STATUSES
