"""Waterfalls of a step and of an execution: attempts, LLM calls and backoff waits on one axis.

Drawn with Unicode blocks, one bar per line: `█` an attempt (request to response), `▓` an LLM
call, `▒` a wait as it ran, `░` the part of a planned wait that did not run (cancelled), `│` a
moment (a request that was never sent). Readable from 60 columns up. The rows of a selected
attempt (and the lane of its step) start with `▶`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from console.render.formats import format_duration
from store.queries import AttemptRecord, ExecutionDetail, StepRecord

ATTEMPT, LLM, WAIT, MOMENT = "█", "▓", "▒", "│"
UNRUN = "░"
SELECTED = "▶"
_LABEL_WIDTH = 11
_SOURCES = {
    "backoff": "backoff",
    "retry_after_header": "Retry-After",
    "retry_after_details": "Retry-After (body)",
}


@dataclass(frozen=True, slots=True)
class Span:
    """One bar: `start`/`end` in epoch seconds; `planned_end` past `end` for a wait cut short."""

    label: str
    kind: str
    start: float
    end: float
    note: str
    planned_end: float | None = None
    attempt_n: int | None = None


@dataclass(frozen=True, slots=True)
class Lane:
    """One line of an execution's waterfall: a step and every span of it."""

    label: str
    spans: tuple[Span, ...]
    note: str


def _ms(value: float | None) -> str:
    return "?" if value is None else format_duration(value)


def wait_note(planned_ms: float | None, actual_ms: float | None, source: str | None,
              outcome: str | None) -> str:  # fmt: skip
    """`wait 1.0 s planned · 1.0 s actual · Retry-After`, with `CANCELLED` when cut short."""
    origin = _SOURCES.get(source or "", source or "?")
    actual = "not finished" if actual_ms is None else f"{_ms(actual_ms)} actual"
    note = f"wait {_ms(planned_ms)} planned · {actual} · {origin}"
    if outcome and outcome != "finished":
        note += f" · {outcome.upper()}"
    return note


def attempt_spans(attempt: AttemptRecord) -> list[Span]:
    """The attempt's own bar, then its LLM calls, then the wait after it."""
    spans: list[Span] = []
    status = attempt.transport_error or (attempt.status if attempt.dispatched else "not sent")
    verdict = f" → {attempt.action}" if attempt.action else ""
    start = attempt.started_at or attempt.decided_at
    if start is not None:
        if attempt.dispatched:
            end = attempt.responded_at or attempt.decided_at or start
            took = f" in {_ms(attempt.elapsed_ms)}" if attempt.elapsed_ms is not None else ""
            spans.append(Span(f"#{attempt.n}", ATTEMPT, start, end, f"{status}{took}{verdict}",
                              attempt_n=attempt.n))  # fmt: skip
        else:
            spans.append(Span(f"#{attempt.n}", MOMENT, start, start, f"{status}{verdict}",
                              attempt_n=attempt.n))  # fmt: skip
    for call in attempt.llm_calls:
        if call.called_at is None:
            continue
        latency = (call.latency_ms or 0.0) / 1000.0
        note = f"LLM {call.site} {_ms(call.latency_ms)} {call.status_text}"
        spans.append(Span(" llm", LLM, call.called_at, call.called_at + latency, note,
                          attempt_n=attempt.n))  # fmt: skip
    backoff = attempt.backoff
    if backoff is not None and backoff.planned_at is not None:
        planned_end = backoff.planned_at + (backoff.planned_ms or 0.0) / 1000.0
        ran = backoff.actual_ms if backoff.actual_ms is not None else backoff.planned_ms
        end = backoff.planned_at + (ran or 0.0) / 1000.0
        note = wait_note(backoff.planned_ms, backoff.actual_ms, backoff.delay_source,
                         backoff.outcome)  # fmt: skip
        spans.append(Span(" wait", WAIT, backoff.planned_at, end, note,
                          planned_end=planned_end if planned_end > end else None,
                          attempt_n=attempt.n))  # fmt: skip
    return spans


def step_spans(step: StepRecord) -> list[Span]:
    """Every span of a step in time order of its attempts."""
    return [span for attempt in step.attempts for span in attempt_spans(attempt)]


class _Axis:
    """Maps times onto `cells` character cells starting at `origin`."""

    def __init__(self, origin: float, finish: float, cells: int) -> None:
        self.origin = origin
        self.total = max(finish - origin, 1e-6)
        self.cells = max(cells, 10)

    def cell(self, at: float) -> int:
        return min(self.cells - 1, max(0, int((at - self.origin) / self.total * self.cells)))

    def cell_end(self, at: float) -> int:
        return min(self.cells, max(1, math.ceil((at - self.origin) / self.total * self.cells)))

    def header(self, label: str) -> str:
        right = format_duration(self.total * 1000.0)
        ruler = "0" + "─" * max(0, self.cells - 1 - len(right)) + right
        return f"{label[:_LABEL_WIDTH].ljust(_LABEL_WIDTH)}{ruler}"


def _paint(row: list[str], axis: _Axis, span: Span) -> None:
    first = axis.cell(span.start)
    if span.kind == MOMENT:
        row[first] = MOMENT
        return
    last = max(first + 1, axis.cell_end(span.end))
    for index in range(first, last):
        row[index] = span.kind
    if span.planned_end is not None:
        for index in range(last, max(last, axis.cell_end(span.planned_end))):
            row[index] = UNRUN


def _line(label: str, row: list[str], note: str) -> list[str]:
    """The bar with its note in the blank after (or before) it, else on a line of its own."""
    painted = [index for index, cell in enumerate(row) if cell != " "]
    first, last = (painted[0], painted[-1]) if painted else (0, -1)
    cells = len(row)
    if last + 2 + len(note) <= cells:
        row[last + 2:last + 2 + len(note)] = list(note)
        extra: list[str] = []
    elif len(note) + 1 <= first:
        row[first - 1 - len(note):first - 1] = list(note)
        extra = []
    else:
        extra = [f"{' ' * _LABEL_WIDTH}{note}"]
    return [f"{label[:_LABEL_WIDTH].ljust(_LABEL_WIDTH)}{''.join(row)}".rstrip(), *extra]


def marked(label: str, selected: bool) -> str:
    """`label`, starting with `▶ ` when it is a row of the selected attempt or step."""
    return f"{SELECTED} {label.lstrip()}" if selected else label


def _bar_cells(width: int) -> int:
    return max(20, width - _LABEL_WIDTH - 1)


def _bounds(spans: list[Span]) -> tuple[float, float] | None:
    if not spans:
        return None
    return min(s.start for s in spans), max(s.planned_end or s.end for s in spans)


def step_timeline(step: StepRecord, *, width: int = 80,
                  selected_n: int | None = None) -> list[str]:  # fmt: skip
    """The waterfall of one step: one line per attempt, LLM call and wait; the rows of attempt
    `selected_n` are marked `▶`."""
    spans = step_spans(step)
    bounds = _bounds(spans)
    if bounds is None:
        return [f"{step.step_id}: nothing recorded on the clock (no attempt)"]
    axis = _Axis(*bounds, _bar_cells(width))
    lines = [axis.header(step.step_id)]
    for span in spans:
        row = [" "] * axis.cells
        _paint(row, axis, span)
        selected = selected_n is not None and span.attempt_n == selected_n
        lines += _line(marked(span.label, selected), row, span.note)
    return lines


def execution_lanes(detail: ExecutionDetail) -> list[Lane]:
    """One lane per step: its spans and a short note (status and counts)."""
    lanes = []
    for step in detail.steps:
        waits = sum(1 for a in step.attempts if a.backoff is not None)
        calls = sum(len(a.llm_calls) for a in step.attempts)
        parts = [step.status or "?", f"{len(step.attempts)} att"]
        if waits:
            parts.append(f"{waits} wait" + ("s" if waits != 1 else ""))
        if calls:
            parts.append(f"{calls} LLM")
        lanes.append(Lane(step.step_id, tuple(step_spans(step)), " · ".join(parts)))
    return lanes


def execution_timeline(detail: ExecutionDetail, *, width: int = 80,
                       selected: tuple[str, int | None] | None = None) -> list[str]:  # fmt: skip
    """The waterfall of an execution: one line per step, every attempt, call and wait on it;
    `selected` (step id, attempt) marks that step's lane `▶` and the first cell of that
    attempt's bar `▶`."""
    lanes = execution_lanes(detail)
    bounds = _bounds([span for lane in lanes for span in lane.spans])
    if bounds is None:
        return ["nothing recorded on the clock (no attempt)"]
    axis = _Axis(*bounds, _bar_cells(width))
    lines = [axis.header("execution")]
    for lane in lanes:
        row = [" "] * axis.cells
        for span in sorted(lane.spans, key=lambda s: s.kind == ATTEMPT):  # attempts on top
            _paint(row, axis, span)
        here = selected is not None and lane.label == selected[0]
        if here:
            _mark_attempt(row, axis, lane, selected[1])
        lines += _line(marked(lane.label, here), row, lane.note)
    return lines


def _mark_attempt(row: list[str], axis: _Axis, lane: Lane, n: int | None) -> None:
    """Put `▶` on the first cell of attempt `n`'s bar in an execution lane."""
    bar = next((s for s in lane.spans if s.attempt_n == n and s.kind in (ATTEMPT, MOMENT)), None)
    if bar is not None:
        row[axis.cell(bar.start)] = SELECTED


LEGEND = f"{ATTEMPT} attempt  {LLM} LLM call  {WAIT} wait  {UNRUN} planned, not waited  " \
         f"{MOMENT} not sent"


def step_in_execution_timeline(step: StepRecord, detail: ExecutionDetail, *, width: int = 80,
                               selected_n: int | None = None) -> list[str]:  # fmt: skip
    """The Timeline tab (and `explain EXECUTION STEP --timeline`): the step's waterfall, then
    the execution's with the step's lane marked, then the legend; attempt `selected_n` is
    marked in both."""
    return [
        f"Step {step.step_id}", *step_timeline(step, width=width, selected_n=selected_n), "",
        "Execution", *execution_timeline(detail, width=width,
                                         selected=(step.step_id, selected_n)),
        "", LEGEND,
    ]  # fmt: skip
