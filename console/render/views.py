"""One view model per step, attempt and LLM call, computed from the store's records.

`truva-console explain` draws them as text (`console.render.text`), the TUI as Rich
renderables (`console.render.rich_views`); both take every value from here, so the twins
cannot say different things. Each view lists its facts with `fields()`: (label, value) pairs
that both drawings show.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from console.render.formats import format_time
from console.render.request_diff import RequestDiff, request_diffs
from console.render.warnings import attempt_warnings
from console.words import counted, reached_wire, received_text, sent_parameters
from executor.policy import RuleMiss
from executor.rule_reads import rule_reads
from store.queries import (
    AttemptRecord,
    BackoffRecord,
    EventRecord,
    LLMCallRecord,
    StepRecord,
)

# Bodies above this size are shown as they are: no pretty-printing, no highlighting.
PRETTY_PRINT_LIMIT_BYTES = 2_000_000

Fields = tuple[tuple[str, str], ...]


def inline_json(value: Any) -> str:
    """A value as compact one-line JSON; strings as they are."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _ms(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f} ms"


# ------------------------------------------------------------------------------------ bodies


@dataclass(frozen=True, slots=True)
class BodyDisplay:
    """A body as text: the exact text (or base64), a pretty form for JSON, and a one-line note.

    `text` is what was on the wire (base64 when it is not UTF-8); `pretty` the same JSON
    indented, when the body is JSON of at most PRETTY_PRINT_LIMIT_BYTES; `language` is `json`
    then, for highlighting.
    """

    text: str
    note: str
    pretty: str | None = None

    @property
    def language(self) -> str | None:
        """`json` when there is a pretty form to highlight."""
        return None if self.pretty is None else "json"

    @property
    def shown(self) -> str:
        """The pretty form when there is one, else the exact text."""
        return self.text if self.pretty is None else self.pretty


def body_display(body: bytes | None) -> BodyDisplay:
    """Exact bytes as readable text: UTF-8 (with a pretty JSON form), or base64 with a note."""
    if body is None:
        return BodyDisplay("", "no body recorded")
    size = len(body)
    if size == 0:
        return BodyDisplay("", "empty body (0 bytes)")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        encoded = base64.b64encode(body).decode("ascii")
        return BodyDisplay(encoded, f"{size} bytes, not valid UTF-8: shown as base64")
    if size <= PRETTY_PRINT_LIMIT_BYTES:
        try:
            pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):  # not JSON, or nested too deeply to lay out
            pass
        else:
            return BodyDisplay(text, f"{size} bytes, JSON", pretty)
    return BodyDisplay(text, f"{size} bytes, UTF-8 text")


def flatten_inputs(inputs: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Decision inputs as (dotted key, value) pairs; nested objects are spread out."""
    if not isinstance(inputs, dict):
        return [(prefix or "inputs", inline_json(inputs))]
    pairs: list[tuple[str, str]] = []
    for key, value in inputs.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            pairs += flatten_inputs(value, name)
        else:
            pairs.append((name, "null" if value is None else inline_json(value)))
    return pairs


def split_inputs(
    rule_id: str | None, inputs: Any
) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """(the pairs `rule_id` reads, in the rule's order; every other pair, in recorded order).

    What a rule reads is `executor.rule_reads`' table; a nested input (`analyzer.changes.city`)
    belongs to its top-level name.
    """
    pairs = flatten_inputs(inputs) if inputs else []
    top = {name: index for index, name in enumerate(rule_reads(rule_id))}
    read = [pair for pair in pairs if pair[0].split(".", 1)[0] in top]
    read.sort(key=lambda pair: top[pair[0].split(".", 1)[0]])
    rest = [pair for pair in pairs if pair[0].split(".", 1)[0] not in top]
    return tuple(read), tuple(rest)


# ------------------------------------------------------------------------------------ LLM calls


@dataclass(frozen=True, slots=True)
class PromptMessage:
    """One prompt message: its role and its complete text."""

    role: str
    text: str


# What an LLM call's response headers show when none were recorded (no answer, or a store
# written before schema v3 kept them).
NO_RESPONSE_HEADERS = "none recorded"


@dataclass(frozen=True, slots=True)
class LLMCallView:
    """One LLM call, complete: settings, outcome, every prompt message, raw and parsed answer.

    `text_note` is set (and `messages`, `raw_text` empty) when the text was not recorded.
    """

    site: str
    model: str
    status: str
    tokens: str
    latency: str
    called_at: str
    endpoint: str
    temperature: str
    max_tokens: str
    error: str | None
    parse_error: str | None
    text_note: str | None
    messages: tuple[PromptMessage, ...]
    raw_text: str | None
    parsed: str | None
    response_headers: tuple[str, ...] = ()

    def header_lines(self) -> tuple[str, ...]:
        """The answer's headers as `name: value` lines, or one line saying none were recorded."""
        return self.response_headers or (NO_RESPONSE_HEADERS,)

    def fields(self) -> Fields:
        """The facts of the call both drawings show, in order."""
        rows = [
            ("site", self.site), ("model", self.model), ("status", self.status),
            ("usage", self.tokens), ("latency", self.latency), ("at", self.called_at),
            ("endpoint", self.endpoint), ("temperature", self.temperature),
            ("max_tokens", self.max_tokens),
        ]  # fmt: skip
        if self.error:
            rows.append(("error", self.error))
        if self.parse_error:
            rows.append(("parse error", self.parse_error))
        if self.text_note is not None:
            rows.append(("text", self.text_note))
        for message in self.messages:
            rows.append((f"prompt ({message.role})", message.text))
        rows.append(("response headers", "\n".join(self.header_lines())))
        if self.text_note is None:
            rows.append(("raw response", self.raw_text if self.raw_text is not None else "(none)"))
        if self.parsed is not None:
            rows.append(("parsed answer", self.parsed))
        return tuple(rows)


def llm_call_view(call: LLMCallRecord) -> LLMCallView:
    """The view of one recorded LLM call."""
    messages: list[PromptMessage] = []
    if call.text_recorded:
        for message in call.messages if isinstance(call.messages, list) else []:
            role = message.get("role", "?") if isinstance(message, dict) else "?"
            content = message.get("content", message) if isinstance(message, dict) else message
            text = content if isinstance(content, str) else json.dumps(content, indent=2)
            messages.append(PromptMessage(str(role), text))
    return LLMCallView(
        site=str(call.site),
        model=str(call.model),
        status=call.status_text,
        tokens=call.tokens_text,
        latency="?" if call.latency_ms is None else f"{call.latency_ms:.0f} ms",
        called_at=format_time(call.called_at),
        endpoint=str(call.base_url),
        temperature=str(call.temperature),
        max_tokens=str(call.max_tokens),
        error=call.error,
        parse_error=call.parse_error,
        text_note=None if call.text_recorded else (call.text_note or "not recorded"),
        messages=tuple(messages),
        raw_text=call.raw_text if call.text_recorded else None,
        parsed=None
        if call.parsed is None
        else json.dumps(call.parsed, indent=2, ensure_ascii=False),
        response_headers=_headers(call.response_headers),
    )


# ------------------------------------------------------------------------------------ attempts


@dataclass(frozen=True, slots=True)
class LayerVerdict:
    """A correction layer of a decision: `consulted` or `not consulted`, with the detail."""

    layer: str
    verdict: str
    detail: str


@dataclass(frozen=True, slots=True)
class DecisionView:
    """The routing decision of an attempt; `recorded` is False while it is in flight.

    `read_inputs` are the (dotted key, value) pairs the deciding rule reads
    (`executor.rule_reads`), `other_inputs` the rest of the recorded inputs.
    """

    recorded: bool
    action: str
    rule_id: str
    layer: str | None
    reason: str
    impact: str | None
    recovery: str | None
    budgets: str | None
    delay: str | None
    corrected: str | None
    not_matched: tuple[RuleMiss, ...]
    layers: tuple[LayerVerdict, ...]
    read_inputs: tuple[tuple[str, str], ...]
    other_inputs: tuple[tuple[str, str], ...]

    @property
    def inputs(self) -> tuple[tuple[str, str], ...]:
        """Every recorded input: the ones the deciding rule read, then the rest."""
        return self.read_inputs + self.other_inputs

    @property
    def headline(self) -> str:
        """`retry_corrected by rule analyzer.accept (layer analyzer)`."""
        layer = f" (layer {self.layer})" if self.layer else ""
        return f"{self.action} by rule {self.rule_id}{layer}"


@dataclass(frozen=True, slots=True)
class SentView:
    """What an attempt sent; `line` says when nothing was sent or nothing reached the wire."""

    dispatched: bool
    line: str
    at: str
    parameters: str
    corrected: str | None
    headers: tuple[str, ...]
    body: BodyDisplay


@dataclass(frozen=True, slots=True)
class ReceivedView:
    """What came back: `line` (status or transport error and time), message, retry policy."""

    line: str
    message: str | None
    retry_policy: str | None
    headers: tuple[str, ...]
    body: BodyDisplay | None


@dataclass(frozen=True, slots=True)
class BackoffView:
    """The wait after an attempt: planned and actual, what set it, how it ended."""

    planned: str
    source: str
    actual: str
    outcome: str


@dataclass(frozen=True, slots=True)
class EventView:
    """An event at an attempt, a step or the execution."""

    kind: str
    name: str
    message: str
    attrs: str | None


@dataclass(frozen=True, slots=True)
class AttemptView:
    """One attempt: sent, received, the decision, its LLM calls, the wait and its events."""

    n: int
    counter: str
    sent: SentView
    received: ReceivedView | None
    decision: DecisionView
    llm_calls: tuple[LLMCallView, ...]
    backoff: BackoffView | None
    events: tuple[EventView, ...]
    warnings: tuple[str, ...] = ()

    def fields(self) -> Fields:
        """The facts of the attempt both drawings show (LLM calls have their own fields)."""
        rows = [("sent", self.sent.line), ("parameters", self.sent.parameters)]
        if self.sent.dispatched:
            rows += [("at", self.sent.at), *(("header", h) for h in self.sent.headers),
                     ("body", self.sent.body.note)]  # fmt: skip
            if self.sent.corrected:
                rows.append(("corrected", self.sent.corrected))
        if self.received is not None:
            rows.append(("received", self.received.line))
            if self.received.message:
                rows.append(("message", self.received.message))
            if self.received.retry_policy:
                rows.append(("retry policy", self.received.retry_policy))
            rows += [("header", header) for header in self.received.headers]
            if self.received.body is not None:
                rows.append(("body", self.received.body.note))
        rows += [("warning", f"tool contract: {warning}") for warning in self.warnings]
        decision = self.decision
        if decision.recorded:
            rows += [("decision", decision.headline), ("reason", decision.reason)]
            for label in ("impact", "recovery", "budgets", "delay", "corrected"):
                value = getattr(decision, label)
                if value:
                    rows.append((label, value))
            rows += [(miss.rule_id, miss.reason) for miss in decision.not_matched]
            rows += [(note.layer, f"{note.verdict} {note.detail}") for note in decision.layers]
            rows += list(decision.inputs)
        if self.backoff is not None:
            backoff = self.backoff
            rows += [("planned", backoff.planned), ("actual", backoff.actual),
                     ("source", backoff.source), ("outcome", backoff.outcome)]  # fmt: skip
        for event in self.events:
            rows.append((event.kind, event.message))
        return tuple(rows)


def _headers(headers: Any) -> tuple[str, ...]:
    return tuple(f"{name}: {value}" for name, value in dict(headers or {}).items())


def _sent(attempt: AttemptRecord) -> SentView:
    parameters = inline_json(attempt.parameters)
    if not attempt.dispatched:
        return SentView(False, "nothing: the request was not dispatched", "-", parameters,
                        None, (), body_display(None))  # fmt: skip
    line = f"{attempt.method} {attempt.url}"
    if not reached_wire(attempt.dispatched, attempt.transport_error):
        line = f"nothing reached the wire: the connection for {line} failed"
    corrected = (
        f"parameters from the {attempt.correction_layer} layer"
        if attempt.correction_layer
        else None
    )
    headers, body = _headers(attempt.request_headers), body_display(attempt.request_body)
    return SentView(True, line, format_time(attempt.started_at), parameters, corrected, headers,
                    body)  # fmt: skip


def _received(attempt: AttemptRecord) -> ReceivedView | None:
    if not attempt.dispatched:
        if not attempt.transport_error:
            return None
        got = received_text(False, attempt.status, attempt.transport_error)
        return ReceivedView(got, attempt.transport_error_message or None, None, (), None)
    if attempt.responded_at is None:
        return ReceivedView("nothing recorded (no response yet, or the writer stopped)", None,
                            None, (), None)  # fmt: skip
    elapsed = "" if attempt.elapsed_ms is None else f" after {attempt.elapsed_ms:.1f} ms"
    if attempt.transport_error:
        line = f"transport error {attempt.transport_error}{elapsed}"
        message = attempt.transport_error_message or "-"
    else:
        line = f"{received_text(attempt.dispatched, attempt.status, None)}{elapsed}"
        message = None
    return ReceivedView(line, message, attempt.retry_policy, _headers(attempt.response_headers),
                        body_display(attempt.response_body))  # fmt: skip


def _budgets(budgets: Any) -> str | None:
    if not isinstance(budgets, dict) or not budgets:
        return None
    return ", ".join(
        f"{name.removesuffix('_left').replace('_', ' ')} left "
        f"{'unlimited' if value is None else value}"
        for name, value in budgets.items()
    )


def _decision(attempt: AttemptRecord) -> DecisionView:
    decision = attempt.decision if isinstance(attempt.decision, dict) else {}
    read, rest = split_inputs(attempt.rule_id, decision.get("inputs"))
    delay = None
    if attempt.delay_ms is not None:
        delay = f"{attempt.delay_ms:.1f} ms ({attempt.delay_source})"
    return DecisionView(
        recorded=attempt.action is not None,
        action=str(attempt.action),
        rule_id=attempt.rule_id or "-",
        layer=attempt.decision_layer or None,
        reason=attempt.reason or "-",
        impact=str(decision["impact"]) if decision.get("impact") else None,
        recovery=str(decision["recovery"]) if decision.get("recovery") else None,
        budgets=_budgets(decision.get("budgets")),
        delay=delay,
        corrected=None
        if attempt.corrected_parameters is None
        else inline_json(attempt.corrected_parameters),
        not_matched=tuple(
            RuleMiss(str(miss.get("rule_id")), str(miss.get("reason")))
            for miss in decision.get("not_matched") or []
        ),
        layers=tuple(
            LayerVerdict(
                str(note.get("layer")),
                "consulted" if note.get("consulted") else "not consulted",
                str(note.get("detail")),
            )
            for note in decision.get("layers") or []
        ),
        read_inputs=read,
        other_inputs=rest,
    )


def backoff_view(backoff: BackoffRecord | None) -> BackoffView | None:
    """The wait after an attempt, or None when none followed."""
    if backoff is None:
        return None
    return BackoffView(
        planned=_ms(backoff.planned_ms),
        source=str(backoff.delay_source),
        actual="not finished" if backoff.actual_ms is None else _ms(backoff.actual_ms),
        outcome=backoff.outcome or "no end recorded",
    )


def event_view(event: EventRecord) -> EventView:
    """An event's kind, name, message and attributes as text."""
    return EventView(
        kind=event.kind,
        name=event.name or "-",
        message=event.message or "",
        attrs=inline_json(event.attrs) if event.attrs else None,
    )


def attempt_view(attempt: AttemptRecord) -> AttemptView:
    """The view of one recorded attempt."""
    decision = attempt.decision if isinstance(attempt.decision, dict) else {}
    inputs = decision.get("inputs") or {}
    counter = f"policy attempt {attempt.attempt_number}"
    if isinstance(inputs, dict) and inputs.get("max_attempts") is not None:
        counter += f" of {inputs['max_attempts']}"
    return AttemptView(
        n=attempt.n,
        counter=counter,
        sent=_sent(attempt),
        received=_received(attempt),
        decision=_decision(attempt),
        llm_calls=tuple(llm_call_view(call) for call in attempt.llm_calls),
        backoff=backoff_view(attempt.backoff),
        events=tuple(event_view(e) for e in attempt.events if e.kind != "backoff"),
        warnings=tuple(warning.message for warning in attempt_warnings(attempt)),
    )


# ------------------------------------------------------------------------------------ steps


@dataclass(frozen=True, slots=True)
class SentRun:
    """A run of attempts that sent the same parameters: `sent #1-#3 {…}`."""

    label: str
    parameters: str
    note: str


@dataclass(frozen=True, slots=True)
class StepView:
    """One step: identity, counts, planned and sent parameters, outcome, error or skip reason."""

    step_id: str
    name: str
    status: str
    counts: str
    depends_on: str
    planned: str
    planned_differs: bool
    sent: tuple[SentRun, ...]
    protected: str | None
    contract: str | None
    outcome: str | None
    error: str | None
    skipped: str | None
    result: str | None
    diffs: tuple[RequestDiff, ...] = ()

    def fields(self) -> Fields:
        """The facts of the step both drawings show."""
        rows = [("step", self.step_id), ("tool", self.name), ("status", self.status),
                ("depends on", self.depends_on)]  # fmt: skip
        if self.planned_differs:
            rows.append(("planned", self.planned))
        rows += [(run.label, f"{run.parameters}{run.note}") for run in self.sent]
        rows += [(f"changed #{diff.before} → #{diff.after}", f"{change.key}: {change.old} → "
                  f"{change.new}") for diff in self.diffs for change in diff.changes]  # fmt: skip
        for label in ("outcome", "error", "skipped"):
            value = getattr(self, label)
            if value:
                rows.append((label, value))
        return tuple(rows)


def step_view(step: StepRecord) -> StepView:
    """The view of one recorded step."""
    runs = sent_parameters(step.attempts)
    planned = inline_json(step.parameters)
    contract = None
    if (step.side_effects and step.side_effects != "none") or step.orchestrator:
        contract = f"side effects {step.side_effects}, orchestrator {bool(step.orchestrator)}"
    return StepView(
        step_id=step.step_id,
        name=f"{step.tool}.{step.capability}" if step.tool else "(tool unknown)",
        status=step.status or "unknown",
        counts=f"{counted(step.dispatch_count, 'dispatch', 'dispatches')}, "
        f"{counted(len(step.attempts), 'attempt')}, "
        f"{counted(step.validation_retries, 'correction')}, "
        f"{counted(step.semantic_retries, 're-resolution')}",
        depends_on=", ".join(step.depends_on) or "-",
        planned=planned,
        planned_differs=not runs or inline_json(runs[0].parameters) != planned,
        sent=tuple(
            SentRun(f"{run.verb} {run.attempts_label}", inline_json(run.parameters), run.note)
            for run in runs
        ),
        protected=inline_json(step.protected_keys) if step.protected_keys else None,
        contract=contract,
        outcome=f"{step.final_action} by rule {step.final_rule_id}" if step.final_action else None,
        # A skipped step's error is its skip reason (TruvaG3's words): shown once, as skipped.
        error=step.error if step.error and step.error != step.skip_reason else None,
        skipped=step.skip_reason or None,
        result=None if step.result is None else inline_json(step.result),
        diffs=tuple(request_diffs(step)),
    )
