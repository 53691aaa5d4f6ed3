"""How a replayed step ended, in words shared by `truva-console replay` and the replay screen."""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.words import compact_json, counted

if TYPE_CHECKING:
    from console.replay.engine import ReplayResult
    from store.queries import StepRecord


def _dispatches(count: int | None) -> str:
    return counted(count, "dispatch", "dispatches")


def _ending(status: str | None, action: str | None, rule: str | None, count: int | None) -> str:
    if status == "succeeded":
        return f"success after {_dispatches(count)}"
    if status == "skipped" or action is None:
        return status or "not run"
    return f"{action} by {rule} after {_dispatches(count)}"


def describe_original(step: StepRecord) -> str:
    """`stop_budget by budget.attempts after 3 dispatches`, `success after 2 dispatches`."""
    return _ending(step.status, step.final_action, step.final_rule_id, step.dispatch_count)


def describe_replay(result: ReplayResult) -> str:
    """How the replayed step ended, in the words of `describe_original`."""
    step = result.step
    if step is None:
        return "not run"
    text = _ending(step.status, step.final_action, step.final_rule, step.dispatch_count)
    if result.unscripted_dispatch is not None:
        text += f" (no recorded response for dispatch {result.unscripted_dispatch})"
    return text


def describe_comparison(result: ReplayResult) -> str:
    """Whether the replay changed the outcome, or ran out of responses and so cannot say."""
    if result.unscripted_dispatch is not None:
        number = result.unscripted_dispatch
        return (
            f"ran out of scripted responses: dispatch {number} has no recorded or edited "
            f"response, so the replay stopped there (give one with --response {number}=FILE)"
        )
    if result.llm_calls_unanswered:
        number = result.llm_calls_unanswered[0]
        return (
            f"ran out of recorded LLM answers: LLM call {number} had none and got HTTP 404 "
            "from the replay's LLM server (use --llm live to ask a model)"
        )
    return "outcome changed" if result.changed else "outcome unchanged: same decisions"


def describe_divergence(result: ReplayResult) -> str | None:
    """`first divergence: attempt 2: status 503 → 200, action retry_same → success, …`, or None
    when every attempt is the same."""
    divergence = result.first_divergence
    if divergence is None:
        return None
    lead = f"first divergence: attempt {divergence.attempt}: "
    if divergence.missing == "original":
        return lead + "the original run made no such attempt"
    if divergence.missing == "replay":
        return lead + "the replay made no such attempt"
    changes = ", ".join(
        f"{name} {_field_text(was)} → {_field_text(now)}" for name, was, now in divergence.fields
    )
    return lead + changes


def _field_text(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        return compact_json(value)
    return str(value)
