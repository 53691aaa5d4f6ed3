"""The detail pane of one attempt: decision, request, response, LLM calls, backoff and events."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import ContentSwitcher, Static, TabbedContent, TabPane, TextArea

from console.printable import printable
from console.render.formats import format_duration, format_time
from console.render.warnings import attempt_warnings
from console.tui.widgets.cells import inline_json
from console.tui.widgets.decision_panel import DecisionPanel
from console.tui.widgets.decision_panel import field_grid as _fields
from console.tui.widgets.decision_panel import heading as _heading
from console.tui.widgets.diff_view import diff_renderable
from console.tui.widgets.timeline_view import TimelineView
from console.words import reached_wire, received_text
from store.queries import AttemptRecord, EventRecord, ExecutionDetail, LLMCallRecord, StepRecord

# Bodies above this size are shown as they are: no pretty-printing, no highlighting.
PRETTY_PRINT_LIMIT_BYTES = 2_000_000

TAB_IDS = ("tab-decision", "tab-request", "tab-response", "tab-llm", "tab-events",
           "tab-timeline", "tab-diff")


@dataclass(frozen=True, slots=True)
class BodyDisplay:
    """A body ready for a TextArea: its text, the highlighting language and a one-line note."""

    text: str
    language: str | None
    note: str


def body_display(body: bytes | None) -> BodyDisplay:
    """Exact bytes as readable text: pretty JSON, UTF-8 text, or base64 with a note."""
    if body is None:
        return BodyDisplay("", None, "no body recorded")
    size = len(body)
    if size == 0:
        return BodyDisplay("", None, "empty body (0 bytes)")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        import base64

        encoded = base64.b64encode(body).decode("ascii")
        return BodyDisplay(encoded, None, f"{size} bytes, not valid UTF-8: shown as base64")
    if size <= PRETTY_PRINT_LIMIT_BYTES:
        try:
            pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pass
        else:
            return BodyDisplay(pretty, "json", f"{size} bytes, JSON (pretty-printed here)")
    return BodyDisplay(text, None, f"{size} bytes, UTF-8 text")


def _headers(headers: Any) -> list[tuple[str, str]]:
    if not headers:
        return [("headers", "-")]
    return [("headers" if index == 0 else "", printable(f"{name}: {value}"))
            for index, (name, value) in enumerate(dict(headers).items())]  # fmt: skip


def request_renderable(attempt: AttemptRecord) -> RenderableType:
    """The request line, parameters and redacted headers (the body goes to a TextArea)."""
    if not attempt.dispatched:
        return _fields([
            ("sent", Text("nothing: the request was not dispatched", style="bold")),
            ("parameters", inline_json(attempt.parameters)),
        ])  # fmt: skip
    request_line = f"{attempt.method} {attempt.url}"
    if not reached_wire(attempt.dispatched, attempt.transport_error):
        request_line = f"nothing reached the wire: the connection for {request_line} failed"
    rows: list[tuple[str, RenderableType | str]] = [
        ("sent", Text(printable(request_line), style="bold")),
        ("at", format_time(attempt.started_at)),
        ("parameters", inline_json(attempt.parameters)),
    ]
    if attempt.correction_layer:
        rows.append(("corrected", f"parameters from the {attempt.correction_layer} layer"))
    rows += _headers(attempt.request_headers)
    rows.append(("body", body_display(attempt.request_body).note))
    return _fields(rows)


def response_renderable(attempt: AttemptRecord) -> RenderableType:
    """The status or transport error, timing, retry policy and headers."""
    if not attempt.dispatched:
        if attempt.transport_error:
            got = received_text(False, attempt.status, attempt.transport_error)
            message = attempt.transport_error_message or ""
            return Text(f"Nothing was received: {got}. {message}".rstrip())
        return Text("Nothing was received: the request was not dispatched.")
    if attempt.responded_at is None:
        return Text("Nothing recorded yet: no response, or the writer stopped.")
    elapsed = "" if attempt.elapsed_ms is None else f" after {format_duration(attempt.elapsed_ms)}"
    if attempt.transport_error:
        outcome = Text(printable(f"transport error {attempt.transport_error}{elapsed}"),
                       style="bold yellow")
        rows: list[tuple[str, RenderableType | str]] = [("received", outcome)]
        rows.append(("message", attempt.transport_error_message or "-"))
    else:
        got = received_text(attempt.dispatched, attempt.status, None)
        rows = [("received", Text(f"{got}{elapsed}", style="bold"))]
    rows.append(("retry policy", attempt.retry_policy or "-"))
    rows += [("contract" if index == 0 else "", Text(f"⚠ {printable(w.message)}", style="yellow"))
             for index, w in enumerate(attempt_warnings(attempt))]  # fmt: skip
    rows += _headers(attempt.response_headers)
    rows.append(("body", body_display(attempt.response_body).note))
    return _fields(rows)


def llm_text(calls: tuple[LLMCallRecord, ...], step_calls: tuple[LLMCallRecord, ...] = ()) -> str:
    """Every LLM call, complete: settings, each prompt message, the raw answer, parse errors."""
    if not calls and not step_calls:
        return "No LLM call at this attempt.\n"
    blocks = [_llm_block(call, index, len(calls)) for index, call in enumerate(calls, start=1)]
    if step_calls:
        blocks.append("══ LLM calls at this step not tied to a recorded attempt ══\n")
        blocks += [_llm_block(call, i, len(step_calls)) for i, call in enumerate(step_calls, 1)]
    return "\n".join(blocks)


def _llm_block(call: LLMCallRecord, index: int, count: int) -> str:
    tokens = call.tokens_text
    latency = "?" if call.latency_ms is None else f"{call.latency_ms:.0f} ms"
    lines = [
        f"══ LLM call {index} of {count} · {call.site} · model {call.model} · "
        f"{call.status_text} ══",
        f"usage       {tokens}",
        f"latency     {latency}   at {format_time(call.called_at)}",
        f"endpoint    {call.base_url}   temperature {call.temperature}   "
        f"max_tokens {call.max_tokens}",
    ]
    if call.error:
        lines.append(f"error       {call.error}")
    if call.parse_error:
        lines.append(f"parse error {call.parse_error}")
    if not call.text_recorded:
        lines += ["", "── prompt and raw response ──", call.text_note or "not recorded"]
    else:
        messages = call.messages if isinstance(call.messages, list) else []
        for number, message in enumerate(messages, start=1):
            role = message.get("role", "?") if isinstance(message, dict) else "?"
            content = message.get("content", message) if isinstance(message, dict) else message
            text = content if isinstance(content, str) else json.dumps(content, indent=2)
            lines += ["", f"── prompt message {number} of {len(messages)}: {role} ──", text]
        lines += ["", "── raw response ──",
                  call.raw_text if call.raw_text is not None else "(none)"]  # fmt: skip
    if call.parsed is not None:
        lines += ["", "── parsed answer ──",
                  json.dumps(call.parsed, indent=2, ensure_ascii=False)]  # fmt: skip
    return "\n".join(lines) + "\n"


def events_renderable(
    attempt: AttemptRecord, step: StepRecord, detail: ExecutionDetail
) -> RenderableType:
    """The wait after the attempt (planned vs actual) and every event near it."""
    parts: list[RenderableType] = [Text("Backoff after this attempt", style="bold underline")]
    backoff = attempt.backoff
    if backoff is None:
        parts.append(Text("no wait after this attempt", style="dim"))
    else:
        planned = "?" if backoff.planned_ms is None else f"{backoff.planned_ms:.1f} ms"
        actual = "not finished" if backoff.actual_ms is None else f"{backoff.actual_ms:.1f} ms"
        parts.append(_fields([
            ("planned", f"{planned} (set by {backoff.delay_source})"),
            ("actual", f"{actual} ({backoff.outcome or 'no end recorded'})"),
        ]))  # fmt: skip
    groups = (
        ("Events at this attempt", [e for e in attempt.events if e.kind != "backoff"]),
        (f"Events of {step.step_id} outside any attempt", list(step.events)),
        ("Events of the execution outside any step", list(detail.events)),
    )
    for title, events in groups:
        if events or title.startswith("Events at"):
            parts.append(_heading(title))
            parts.append(_events_table(events))
    return Group(*parts)


def _events_table(events: list[EventRecord]) -> RenderableType:
    if not events:
        return Text("none", style="dim")
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for event in events:
        attrs = f"\n{inline_json(event.attrs)}" if event.attrs else ""
        table.add_row(printable(event.kind), printable(event.name) or "-",
                      printable(f"{event.message or ''}{attrs}"))
    return table


class AttemptDetail(Vertical):
    """Tabs for the selected attempt, or a note when the step has no attempt to show."""

    def compose(self) -> ComposeResult:
        with ContentSwitcher(initial="detail-note", id="detail-switcher"):
            yield Static("Select an attempt.", id="detail-note")
            with TabbedContent(id="detail-tabs"):
                with TabPane("Decision", id="tab-decision"):
                    yield DecisionPanel(id="decision-panel", classes="detail-scroll")
                with TabPane("Request", id="tab-request"):
                    yield Static(id="request-head", classes="detail-head")
                    yield TextArea.code_editor(read_only=True, id="request-body",
                                               classes="detail-body")  # fmt: skip
                with TabPane("Response", id="tab-response"):
                    yield Static(id="response-head", classes="detail-head")
                    yield TextArea.code_editor(read_only=True, id="response-body",
                                               classes="detail-body")  # fmt: skip
                with TabPane("LLM", id="tab-llm"):
                    yield TextArea(read_only=True, soft_wrap=True, id="llm-text")
                with (
                    TabPane("Backoff & events", id="tab-events"),
                    VerticalScroll(classes="detail-scroll"),
                ):
                    yield Static(id="events-body")
                with (
                    TabPane("Timeline", id="tab-timeline"),
                    VerticalScroll(classes="detail-scroll"),
                ):
                    yield TimelineView(id="timeline-body")
                with TabPane("Diff", id="tab-diff"), VerticalScroll(classes="detail-scroll"):
                    yield Static(id="diff-body")

    def show_note(self, text: str) -> None:
        """Show `text` instead of the tabs."""
        self.query_one("#detail-note", Static).update(text)
        self.query_one("#detail-switcher", ContentSwitcher).current = "detail-note"

    def show_attempt(
        self, attempt: AttemptRecord, step: StepRecord, detail: ExecutionDetail
    ) -> None:
        """Fill every tab from `attempt`."""
        self.query_one(DecisionPanel).show(attempt)
        self.query_one("#request-head", Static).update(request_renderable(attempt))
        self._show_body("#request-body", attempt.request_body if attempt.dispatched else None)
        self.query_one("#response-head", Static).update(response_renderable(attempt))
        self._show_body("#response-body", attempt.response_body)
        llm_area = self.query_one("#llm-text", TextArea)
        llm_area.load_text(printable(llm_text(attempt.llm_calls, step.llm_calls)))
        self.query_one("#events-body", Static).update(events_renderable(attempt, step, detail))
        self.query_one(TimelineView).show(step, detail)
        self.query_one("#diff-body", Static).update(diff_renderable(step, attempt.n))
        tabs = self.query_one("#detail-tabs", TabbedContent)
        tabs.get_tab("tab-llm").label = f"LLM ({len(attempt.llm_calls)})"
        other_events = sum(1 for e in attempt.events if e.kind != "backoff")
        events_label = "Backoff & events" + (f" ({other_events})" if other_events else "")
        tabs.get_tab("tab-events").label = events_label
        self.query_one("#detail-switcher", ContentSwitcher).current = "detail-tabs"

    def _show_body(self, selector: str, body: bytes | None) -> None:
        area = self.query_one(selector, TextArea)
        display = body_display(body)
        area.language = display.language
        area.load_text(printable(display.text))

    def show_tab(self, tab_id: str) -> None:
        """Switch to the tab `tab_id` (one of TAB_IDS)."""
        self.query_one("#detail-tabs", TabbedContent).active = tab_id
