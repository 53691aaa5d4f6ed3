"""What a what-if cannot know: a sentence for each overridden budget counted across steps."""

from __future__ import annotations

import pytest

from console.whatif import CANNOT_KNOW, CROSS_STEP_BUDGETS, cannot_know
from executor.policy.redecide import REDECIDE_KEYS
from executor.rule_reads import RULE_READS

CROSS_STEP = "counted across the steps of an execution"

# (overrides, the keys the sentence names, or () for no sentence)
CASES = {
    "per-step-key": ({"max_attempts": 5}, ()),
    "backoff-key": ({"initial_delay_ms": 50}, ()),
    "no-overrides": ({}, ()),
    "retries-per-tool": ({"max_retries_per_tool": 1}, ("max_retries_per_tool",)),
    "tokens-and-a-per-step-key": ({"max_total_tokens": 10, "max_attempts": 5},
                                  ("max_total_tokens",)),
    "two-task-budgets": ({"max_llm_calls": 1, "max_wall_clock_s": 5},
                         ("max_llm_calls", "max_wall_clock_s")),
    "repeated-errors": ({"max_repeated_errors": 2}, ("max_repeated_errors",)),
}


@pytest.mark.parametrize(("overrides", "named"), CASES.values(), ids=CASES.keys())
def test_the_cross_step_sentence_names_each_task_wide_budget(overrides, named) -> None:
    text = cannot_know(overrides)
    assert text.startswith(CANNOT_KNOW)
    if not named:
        assert text == CANNOT_KNOW
        return
    assert CROSS_STEP in text and "recorded under the old config" in text
    for key in named:
        assert key in text and CROSS_STEP_BUDGETS[key] in text
    for key in set(CROSS_STEP_BUDGETS) - set(named):
        assert key not in text


def test_two_budgets_read_as_one_sentence() -> None:
    assert cannot_know({"max_llm_calls": 1, "max_wall_clock_s": 5}).endswith(
        " max_llm_calls and max_wall_clock_s are budgets counted across the steps of an "
        "execution: each decision is re-decided from the counters recorded under the old "
        "config (llm_calls_used, elapsed_s), but a change in one step would have moved the "
        "counters the later steps saw."
    )


def test_each_cross_step_budget_is_a_whatif_key_read_with_its_counter() -> None:
    for key, counter in CROSS_STEP_BUDGETS.items():
        assert key in REDECIDE_KEYS
        assert any(key in reads and counter in reads for reads in RULE_READS.values()), key
