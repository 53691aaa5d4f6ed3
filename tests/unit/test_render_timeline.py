"""Waterfalls: attempts, LLM calls and waits on one axis, waits planned vs actual and cut short."""

from __future__ import annotations

from dataclasses import replace

import pytest

from console.render.timeline import (
    ATTEMPT,
    LLM,
    SELECTED,
    UNRUN,
    WAIT,
    execution_timeline,
    step_timeline,
)
from store.queries import BackoffRecord, ExecutionDetail, open_store
from tests.support.tui import EXHAUSTED, TRIP, record_synthetic_store


@pytest.fixture(scope="module")
def details(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ExecutionDetail]:
    db = record_synthetic_store(tmp_path_factory.mktemp("timeline") / "debug.duckdb")
    store = open_store(db)
    return {execution_id: store.get_execution(execution_id) for execution_id in (TRIP, EXHAUSTED)}


@pytest.mark.parametrize("width", [60, 80, 200])
def test_no_line_is_wider_than_the_terminal(details, width: int) -> None:
    for detail in details.values():
        lines = execution_timeline(detail, width=width)
        for step in detail.steps:
            lines += step_timeline(step, width=width)
        assert max(len(line) for line in lines) <= width


def test_a_step_shows_each_attempt_and_the_wait_with_its_source(details) -> None:
    lines = step_timeline(details[TRIP].step("step-1"), width=80)
    assert lines[0].startswith("step-1     0─") and lines[0].endswith("1.03 s")
    assert [line.split()[0] for line in lines[1:] if line.startswith(("#", " wait"))] == [
        "#1", "wait", "#2"]  # fmt: skip
    text = "\n".join(lines)
    assert "429 in 12 ms → retry_same" in text and "200 in 12 ms → success" in text
    assert "wait 1.00 s planned · 1.00 s actual · Retry-After" in text
    wait_bar = next(line for line in lines if line.startswith(" wait"))
    assert wait_bar.count(WAIT) > 40 and UNRUN not in wait_bar


def test_an_llm_call_is_a_bar_of_its_own(details) -> None:
    text = "\n".join(step_timeline(details[TRIP].step("step-2"), width=80))
    assert LLM in text and "LLM error_analysis 800 ms HTTP 200" in text


def test_a_cancelled_wait_shows_the_part_not_waited(details) -> None:
    step = details[EXHAUSTED].step("step-1")
    first = step.attempts[0]
    cut = replace(first.backoff, actual_ms=first.backoff.planned_ms / 4, outcome="cancelled")
    step = replace(step, attempts=(replace(first, backoff=cut), *step.attempts[1:]))
    lines = step_timeline(step, width=80)
    wait_bar = next(line for line in lines if line.startswith(" wait"))
    assert WAIT in wait_bar and UNRUN in wait_bar
    assert wait_bar.index(WAIT) < wait_bar.index(UNRUN)
    assert "wait 542 ms planned · 136 ms actual · backoff · CANCELLED" in "\n".join(lines)


def test_an_unfinished_wait_says_so(details) -> None:
    step = details[EXHAUSTED].step("step-1")
    first = step.attempts[0]
    open_wait = BackoffRecord(first.backoff.planned_at, 542.0, "retry_after_details", None, None)
    step = replace(step, attempts=(replace(first, backoff=open_wait),))
    assert "wait 542 ms planned · not finished · Retry-After (body)" in "\n".join(
        step_timeline(step, width=80))  # fmt: skip


def test_the_execution_has_one_lane_per_step(details) -> None:
    lines = execution_timeline(details[TRIP], width=80)
    lanes = [line.split()[0] for line in lines[1:] if line.startswith("step-")]
    assert lanes == ["step-1", "step-2", "step-3", "step-4", "step-5"]
    step_1 = next(line for line in lines if line.startswith("step-1"))
    assert ATTEMPT in step_1 and WAIT in step_1 and "succeeded · 2 att · 1 wait" in step_1
    assert "skipped · 0 att" in next(line for line in lines if line.startswith("step-4"))


def test_the_rows_of_the_selected_attempt_are_marked(details) -> None:
    step = details[TRIP].step("step-1")
    plain = step_timeline(step, width=80)
    assert not any(line.startswith(SELECTED) for line in plain)
    marked = step_timeline(step, width=80, selected_n=1)
    starts = [line.split()[:2] for line in marked if line.startswith((SELECTED, "#", " wait"))]
    assert starts == [[SELECTED, "#1"], [SELECTED, "wait"], ["#2", *starts[2][1:2]]]
    # the bars are where they were: only the label column changed
    assert [line[11:] for line in marked] == [line[11:] for line in plain]
    second = step_timeline(step, width=80, selected_n=2)
    assert [line[:4] for line in second if line.startswith(SELECTED)] == [f"{SELECTED} #2"]


def test_the_lane_of_the_selected_step_is_marked_at_the_selected_attempt(details) -> None:
    detail = details[TRIP]
    plain = execution_timeline(detail, width=80)
    marked = execution_timeline(detail, width=80, selected=("step-1", 2))
    lane = next(line for line in marked if line.startswith(f"{SELECTED} step-1"))
    plain_lane = next(line for line in plain if line.startswith("step-1"))
    assert [line for line in marked if line.startswith(SELECTED)] == [lane]
    # attempt #2 starts where its bar was: that cell now holds the marker
    at = lane.index(SELECTED, 2)
    assert plain_lane[at] == ATTEMPT and lane[:at].count(SELECTED) == 1
    assert lane[at + 1 :] == plain_lane[at + 1 :]
