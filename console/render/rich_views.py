"""The step, attempt and LLM call views drawn as Rich renderables (the TUI's attempt detail).

Every value comes from `console.render.views`, as in `console.render.text`; this module only
lays them out, colours them and makes control characters visible.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from console.printable import printable
from console.render.views import AttemptView, BodyDisplay, EventView, LLMCallView, StepView

STATUS_STYLES = {
    "succeeded": "bold green",
    "partial": "bold yellow",
    "failed": "bold red",
    "rejected": "bold red",
    "running": "bold cyan",
    "cancelled": "magenta",
    "interrupted": "bold dark_orange",
    "skipped": "dim",
}

_ACTION_STYLES = {"success": "green", "retry_same": "yellow", "retry_corrected": "yellow"}


def status_text(status: str | None) -> Text:
    """An execution or step status in its colour; running gets a dot."""
    label = status or "unknown"
    if label == "running":
        label = "● running"
    return Text(label, style=STATUS_STYLES.get(status or "", ""))


def action_text(action: str | None) -> Text:
    """A routing action: success green, retries yellow, stops red."""
    if action is None:
        return Text("-", style="dim")
    return Text(action, style=_ACTION_STYLES.get(action, "red"))


def _fields(rows: list[tuple[str, RenderableType | str]]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in rows:
        grid.add_row(label, Text(printable(value)) if isinstance(value, str) else value)
    return grid


def _heading(text: str) -> Text:
    return Text(f"\n{text}", style="bold underline")


def _headers(headers: tuple[str, ...]) -> list[tuple[str, RenderableType | str]]:
    if not headers:
        return [("headers", "-")]
    return [("headers" if index == 0 else "", header) for index, header in enumerate(headers)]


def _body_note(body: BodyDisplay) -> str:
    return body.note + (" (pretty-printed here)" if body.pretty is not None else "")


# Rule names in "why not" and the inputs a rule read each get their own colour (not the yellow
# of retry_same in the action column).
_RULE_STYLE = "magenta"
_READ_STYLE = "bold cyan"


def pairs_renderable(pairs: tuple[tuple[str, str], ...], value_style: str = "") -> Table:
    """Key/value pairs two to a row, read left to right."""
    grid = Table.grid(padding=(0, 2), expand=True)
    for _ in range(2):
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold", ratio=1, style=value_style)
    for index in range(0, len(pairs), 2):
        left, right = pairs[index], pairs[index + 1] if index + 1 < len(pairs) else ("", "")
        grid.add_row(*(Text(printable(cell)) for cell in (*left, *right)))
    return grid


def decision_renderable(view: AttemptView) -> RenderableType:
    """The decision: action, rule, reason, recovery; the inputs the deciding rule read; every
    earlier rule's miss; the correction layers. The other inputs are `pairs_renderable(
    view.decision.other_inputs)` (the TUI folds them under "all inputs")."""
    decision = view.decision
    if not decision.recorded:
        return Text("No decision recorded for this attempt (it was still in flight).")
    headline = Text(printable(decision.headline))
    headline.stylize(action_text(decision.action).style, 0, len(printable(decision.action)))
    rule_at = headline.plain.find(" by rule ") + len(" by rule ")
    headline.stylize("bold", rule_at, rule_at + len(printable(decision.rule_id)))
    rows: list[tuple[str, RenderableType | str]] = [
        ("action", headline),
        ("reason", decision.reason),
    ]
    if decision.recovery:
        rows.append(("recovery", Text(printable(decision.recovery), style="bold")))
    if decision.impact:
        rows.append(("impact", decision.impact))
    if decision.budgets:
        rows.append(("budgets", decision.budgets))
    if decision.delay:
        rows.append(("delay", decision.delay))
    if decision.corrected:
        rows.append(("corrected", decision.corrected))
    parts: list[RenderableType] = [
        Text(f"⚠ tool contract: {printable(warning)}", style="bold yellow")
        for warning in view.warnings
    ]
    parts.append(_fields(rows))
    parts.append(_heading(f"Inputs {printable(decision.rule_id)} read"))
    parts.append(pairs_renderable(decision.read_inputs, _READ_STYLE) if decision.read_inputs
                 else Text("none recorded", style="dim"))  # fmt: skip
    parts.append(_heading("Why not: earlier rules that did not match (first match wins)"))
    if decision.not_matched:
        misses = Table.grid(padding=(0, 2))
        misses.add_column(style=_RULE_STYLE, no_wrap=True)  # yellow means retry_same
        misses.add_column(overflow="fold")
        for miss in decision.not_matched:
            misses.add_row(Text(printable(miss.rule_id)), Text(printable(miss.reason)))
        parts.append(misses)
    else:
        parts.append(Text("none: the first rule matched", style="dim"))
    if decision.layers:
        parts.append(_heading("Correction layers: consulted, or why not"))
        notes = Table.grid(padding=(0, 2))
        notes.add_column(style=_RULE_STYLE, no_wrap=True)
        notes.add_column(no_wrap=True)
        notes.add_column(overflow="fold")
        for note in decision.layers:
            notes.add_row(Text(printable(note.layer)), Text(note.verdict),
                          Text(printable(note.detail)))  # fmt: skip
        parts.append(notes)
    return Group(*parts)


def request_renderable(view: AttemptView) -> RenderableType:
    """The request line, parameters and redacted headers (the body goes to a TextArea)."""
    sent = view.sent
    if not sent.dispatched:
        return _fields([
            ("sent", Text(printable(sent.line), style="bold")),
            ("parameters", sent.parameters),
        ])  # fmt: skip
    rows: list[tuple[str, RenderableType | str]] = [
        ("sent", Text(printable(sent.line), style="bold")),
        ("at", sent.at),
        ("parameters", sent.parameters),
    ]
    if sent.corrected:
        rows.append(("corrected", sent.corrected))
    rows += _headers(sent.headers)
    rows.append(("body", _body_note(sent.body)))
    return _fields(rows)


def response_renderable(view: AttemptView) -> RenderableType:
    """The status or transport error, timing, retry policy and headers."""
    received = view.received
    if not view.sent.dispatched:
        if received is None:
            return Text("Nothing was received: the request was not dispatched.")
        message = printable(received.message or "")
        return Text(f"Nothing was received: {printable(received.line)}. {message}".rstrip())
    if received is None or received.body is None:
        line = received.line if received else "nothing recorded"
        return Text(f"{printable(line).capitalize()}.")
    style = "bold yellow" if received.message is not None else "bold"
    rows: list[tuple[str, RenderableType | str]] = [
        ("received", Text(printable(received.line), style=style))
    ]
    if received.message is not None:
        rows.append(("message", received.message))
    rows.append(("retry policy", received.retry_policy or "-"))
    rows += [("contract" if index == 0 else "", Text(f"⚠ {printable(warning)}", style="yellow"))
             for index, warning in enumerate(view.warnings)]  # fmt: skip
    rows += _headers(received.headers)
    rows.append(("body", _body_note(received.body)))
    return _fields(rows)


def llm_text(calls: tuple[LLMCallView, ...], step_calls: tuple[LLMCallView, ...] = ()) -> str:
    """Every LLM call, complete: settings, each prompt message, the raw answer, parse errors."""
    if not calls and not step_calls:
        return "No LLM call at this attempt.\n"
    blocks = [_llm_block(call, index, len(calls)) for index, call in enumerate(calls, start=1)]
    if step_calls:
        blocks.append("══ LLM calls at this step not tied to a recorded attempt ══\n")
        blocks += [_llm_block(call, i, len(step_calls)) for i, call in enumerate(step_calls, 1)]
    return printable("\n".join(blocks))


def _llm_block(call: LLMCallView, index: int, count: int) -> str:
    lines = [
        f"══ LLM call {index} of {count} · {call.site} · model {call.model} · {call.status} ══",
        f"usage       {call.tokens}",
        f"latency     {call.latency}   at {call.called_at}",
        f"endpoint    {call.endpoint}   temperature {call.temperature}   "
        f"max_tokens {call.max_tokens}",
    ]
    if call.error:
        lines.append(f"error       {call.error}")
    if call.parse_error:
        lines.append(f"parse error {call.parse_error}")
    headers = ["", "── response headers ──", *call.header_lines()]
    if call.text_note is not None:
        lines += ["", "── prompt and raw response ──", call.text_note, *headers]
    else:
        for number, message in enumerate(call.messages, start=1):
            lines += ["", f"── prompt message {number} of {len(call.messages)}: {message.role} ──",
                      message.text]  # fmt: skip
        raw = call.raw_text if call.raw_text is not None else "(none)"
        lines += [*headers, "", "── raw response ──", raw]
    if call.parsed is not None:
        lines += ["", "── parsed answer ──", call.parsed]
    return "\n".join(lines) + "\n"


def events_renderable(
    view: AttemptView,
    step_id: str,
    step_events: tuple[EventView, ...],
    execution_events: tuple[EventView, ...],
) -> RenderableType:
    """The wait after the attempt (planned vs actual) and every event near it."""
    parts: list[RenderableType] = [Text("Backoff after this attempt", style="bold underline")]
    backoff = view.backoff
    if backoff is None:
        parts.append(Text("no wait after this attempt", style="dim"))
    else:
        parts.append(_fields([
            ("planned", f"{backoff.planned} (set by {backoff.source})"),
            ("actual", f"{backoff.actual} ({backoff.outcome})"),
        ]))  # fmt: skip
    groups = (
        ("Events at this attempt", view.events),
        (f"Events of {step_id} outside any attempt", step_events),
        ("Events of the execution outside any step", execution_events),
    )
    for title, events in groups:
        if events or title.startswith("Events at"):
            parts.append(_heading(printable(title)))
            parts.append(_events_table(events))
    return Group(*parts)


def _events_table(events: tuple[EventView, ...]) -> RenderableType:
    if not events:
        return Text("none", style="dim")
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for event in events:
        attrs = f"\n{event.attrs}" if event.attrs else ""
        table.add_row(Text(printable(event.kind)), Text(printable(event.name)),
                      Text(printable(f"{event.message}{attrs}")))  # fmt: skip
    return table


def step_text(step: StepView) -> Text:
    """The step on one wrapped line: identity, dependencies, planned and sent, outcome."""
    text = Text.assemble(
        (printable(step.step_id), "bold"), "  ",
        printable(step.name) if step.name != "(tool unknown)" else "", "  ",
        status_text(step.status if step.status != "unknown" else None),
        f"  ·  depends on {printable(step.depends_on)}",
    )  # fmt: skip
    if step.planned_differs:
        text.append_text(Text.assemble(("  ·  planned ", "bold"), printable(step.planned)))
    for run in step.sent:
        text.append_text(Text.assemble((f"  ·  {run.label} ", "bold"),
                                       printable(run.parameters), run.note))  # fmt: skip
    if step.outcome:
        text.append(printable(f"  ·  outcome {step.outcome}"))
    if step.error:
        text.append(f"  ·  error {printable(step.error)}", style="red")
    if step.skipped:
        text.append(f"  ·  skipped: {printable(step.skipped)}", style="yellow")
    return text
