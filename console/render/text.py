"""The step, attempt and LLM call views drawn as indented, labelled text (`explain`)."""

from __future__ import annotations

import textwrap

from console.render.request_diff import diff_lines
from console.render.views import (
    AttemptView,
    BackoffView,
    BodyDisplay,
    DecisionView,
    EventView,
    LLMCallView,
    ReceivedView,
    SentView,
    StepView,
)

_INDENT = "    "
LABEL_WIDTH = 12
_WRAP_WIDTH = 88


class Lines:
    """Collects labelled, indented lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, text: str = "", *, depth: int = 0) -> None:
        """One line at `depth` indents, trailing blanks removed."""
        self.lines.append((_INDENT * depth + text).rstrip())

    def field(self, label: str, text: str, *, depth: int) -> None:
        """`label` padded to the label column, then `text`."""
        self.add(f"{label.ljust(LABEL_WIDTH)}{text}", depth=depth)

    def block(self, text: str, *, depth: int) -> None:
        """Multi-line text, every line indented; shown in full."""
        for line in text.splitlines() or [""]:
            self.add(line, depth=depth)

    def text(self) -> str:
        """Everything collected, one line each, ending in a newline."""
        return "\n".join(self.lines) + "\n"


def draw_step_head(out: Lines, step: StepView) -> None:
    """The step line, its dependencies, planned and sent parameters and its outcome."""
    out.add(f"== step {step.step_id}  {step.name}  {step.status}  ({step.counts})")
    out.field("depends on", step.depends_on, depth=1)
    out.field("planned", step.planned, depth=1)
    for run in step.sent:
        out.add(f"{run.label.ljust(LABEL_WIDTH - 1)} {run.parameters}{run.note}", depth=1)
    for diff in step.diffs:
        if diff.changes:
            head, *changes = diff_lines(diff)
            out.field("changed", head, depth=1)
            for change in changes:
                out.add(change.strip(), depth=1 + 3)
    for label, value in (("protected", step.protected), ("contract", step.contract),
                         ("outcome", step.outcome), ("error", step.error),
                         ("skipped", step.skipped), ("result", step.result)):  # fmt: skip
        if value is not None:
            out.field(label, value, depth=1)


def draw_attempt(out: Lines, attempt: AttemptView) -> None:
    """One attempt: events, what was sent and received, the decision, LLM calls, the wait."""
    out.add(f"-- attempt {attempt.n} ({attempt.counter})", depth=1)
    for event in attempt.events:
        draw_event(out, event, depth=2)
    _draw_sent(out, attempt.sent)
    _draw_received(out, attempt.received, dispatched=attempt.sent.dispatched)
    for warning in attempt.warnings:
        out.field("warning", f"⚠ tool contract: {warning}", depth=2)
    _draw_decision(out, attempt.decision)
    for call in attempt.llm_calls:
        draw_llm_call(out, call, depth=2)
    if attempt.backoff is not None:
        _draw_backoff(out, attempt.backoff)


def _draw_headers(out: Lines, headers: tuple[str, ...], *, depth: int) -> None:
    if not headers:
        out.field("headers", "-", depth=depth)
    for index, header in enumerate(headers):
        out.field("headers" if index == 0 else "", header, depth=depth)


def _draw_body(out: Lines, body: BodyDisplay, *, depth: int) -> None:
    out.field("body", body.note, depth=depth)
    if body.text:
        out.block(body.text, depth=depth + 1)


def _draw_sent(out: Lines, sent: SentView) -> None:
    out.field("sent", sent.line, depth=2)
    if not sent.dispatched:
        out.field("parameters", sent.parameters, depth=3)
        return
    out.field("at", sent.at, depth=3)
    if sent.corrected:
        out.field("corrected", sent.corrected, depth=3)
    out.field("parameters", sent.parameters, depth=3)
    _draw_headers(out, sent.headers, depth=3)
    _draw_body(out, sent.body, depth=3)


def _draw_received(out: Lines, received: ReceivedView | None, *, dispatched: bool) -> None:
    if received is None:
        return
    policy = received.retry_policy
    policy = f" (retry policy on the wire: {policy})" if policy else ""
    message = f": {received.message}" if received.message else ""
    out.field("received", f"{received.line}{message}{policy}", depth=2)
    if dispatched and received.body is not None:
        _draw_headers(out, received.headers, depth=3)
        _draw_body(out, received.body, depth=3)


def _draw_decision(out: Lines, decision: DecisionView) -> None:
    if not decision.recorded:
        out.field("decision", "none recorded", depth=2)
        return
    out.field("decision", decision.headline, depth=2)
    out.field("reason", decision.reason, depth=3)
    for label in ("impact", "recovery", "budgets"):
        value = getattr(decision, label)
        if value:
            out.field(label, value, depth=3)
    for label, pairs in (("read", decision.read_inputs), ("inputs", decision.other_inputs)):
        joined = " ".join(f"{key}={value}" for key, value in pairs)
        wrapped = textwrap.wrap(joined, width=_WRAP_WIDTH, break_long_words=False,
                                break_on_hyphens=False)  # fmt: skip
        for index, line in enumerate(wrapped):
            out.field(label if index == 0 else "", line, depth=3)
    if decision.delay:
        out.field("delay", decision.delay, depth=3)
    if decision.corrected:
        out.field("corrected", decision.corrected, depth=3)
    if decision.not_matched:
        out.field("not matched", "", depth=2)
        for miss in decision.not_matched:
            out.add(f"{miss.rule_id}: {miss.reason}", depth=3)
    if decision.layers:
        out.field("layers", "", depth=2)
        for note in decision.layers:
            out.add(f"{note.layer}: {note.verdict} — {note.detail}", depth=3)


def _draw_backoff(out: Lines, backoff: BackoffView) -> None:
    waited = (
        "no end recorded"
        if backoff.actual == "not finished"
        else f"waited {backoff.actual} ({backoff.outcome})"
    )
    out.field("backoff", f"planned {backoff.planned} ({backoff.source}), {waited}", depth=2)


def draw_llm_call(out: Lines, call: LLMCallView, *, depth: int) -> None:
    """One LLM call, complete: outcome, settings, every prompt message, raw and parsed answer."""
    out.field("llm call", f"{call.site}  model {call.model}  {call.status}  {call.tokens}  "
              f"latency {call.latency}", depth=depth)  # fmt: skip
    out.field("endpoint", f"{call.endpoint}  temperature {call.temperature}  max_tokens "
              f"{call.max_tokens}  at {call.called_at}", depth=depth + 1)  # fmt: skip
    if call.text_note is not None:
        out.field("prompt", call.text_note, depth=depth + 1)
        _draw_response_headers(out, call, depth=depth + 1)
        out.field("raw answer", call.text_note, depth=depth + 1)
    else:
        out.field("prompt", "", depth=depth + 1)
        for message in call.messages:
            out.add(f"[{message.role}]", depth=depth + 2)
            out.block(message.text, depth=depth + 3)
        _draw_response_headers(out, call, depth=depth + 1)
        out.field("raw answer", "" if call.raw_text is not None else "none", depth=depth + 1)
        if call.raw_text is not None:
            out.block(call.raw_text, depth=depth + 2)
    if call.parsed is not None:
        out.field("parsed", "", depth=depth + 1)
        out.block(call.parsed, depth=depth + 2)
    if call.parse_error:
        out.field("parse error", call.parse_error, depth=depth + 1)
    if call.error:
        out.field("error", call.error, depth=depth + 1)


def _draw_response_headers(out: Lines, call: LLMCallView, *, depth: int) -> None:
    out.field("response headers", "", depth=depth)
    out.block("\n".join(call.header_lines()), depth=depth + 1)


def draw_event(out: Lines, event: EventView, *, depth: int) -> None:
    """`kind  name: message  {attrs}`."""
    attrs = f"  {event.attrs}" if event.attrs else ""
    out.field(event.kind, f"{event.name}: {event.message}{attrs}", depth=depth)
