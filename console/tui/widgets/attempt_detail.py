"""The detail pane of one attempt: decision, request, response, LLM calls, backoff and events."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import ContentSwitcher, Static, TabbedContent, TabPane, TextArea

from console.printable import printable
from console.render.rich_views import (
    events_renderable,
    llm_text,
    request_renderable,
    response_renderable,
)
from console.render.views import BodyDisplay, attempt_view, body_display, event_view, llm_call_view
from console.tui.widgets.decision_panel import DecisionPanel
from console.tui.widgets.diff_view import diff_renderable
from console.tui.widgets.long_text import LongTextArea
from console.tui.widgets.searchable import SearchableStatic
from console.tui.widgets.timeline_view import TimelineView
from store.queries import AttemptRecord, ExecutionDetail, StepRecord
from store.records import step_calls_without_texts

TAB_IDS = ("tab-decision", "tab-request", "tab-response", "tab-llm", "tab-events",
           "tab-timeline", "tab-diff")


class AttemptDetail(Vertical):
    """Tabs for the selected attempt, or a note when the step has no attempt to show."""

    ALLOW_MAXIMIZE = True

    def compose(self) -> ComposeResult:
        with ContentSwitcher(initial="detail-note", id="detail-switcher"):
            yield Static("Select an attempt.", id="detail-note")
            with TabbedContent(id="detail-tabs"):
                with TabPane("Decision", id="tab-decision"):
                    yield DecisionPanel(id="decision-panel", classes="detail-scroll")
                with TabPane("Request", id="tab-request"):
                    yield SearchableStatic(id="request-head", classes="detail-head")
                    yield LongTextArea.code_editor(read_only=True, id="request-body",
                                                  classes="detail-body")  # fmt: skip
                with TabPane("Response", id="tab-response"):
                    yield SearchableStatic(id="response-head", classes="detail-head")
                    yield LongTextArea.code_editor(read_only=True, id="response-body",
                                                  classes="detail-body")  # fmt: skip
                with TabPane("LLM", id="tab-llm"):
                    yield LongTextArea(read_only=True, soft_wrap=True, id="llm-text")
                with (
                    TabPane("Backoff & events", id="tab-events"),
                    VerticalScroll(classes="detail-scroll"),
                ):
                    yield SearchableStatic(id="events-body")
                with (
                    TabPane("Timeline", id="tab-timeline"),
                    VerticalScroll(classes="detail-scroll"),
                ):
                    yield TimelineView(id="timeline-body")
                with TabPane("Diff", id="tab-diff"), VerticalScroll(classes="detail-scroll"):
                    yield SearchableStatic(id="diff-body")

    def show_note(self, text: str) -> None:
        """Show `text` instead of the tabs."""
        self.query_one("#detail-note", Static).update(text)
        self.query_one("#detail-switcher", ContentSwitcher).current = "detail-note"

    def show_attempt(
        self, attempt: AttemptRecord, step: StepRecord, detail: ExecutionDetail
    ) -> None:
        """Fill every tab from the view of `attempt` (the same view `explain` prints)."""
        view = attempt_view(attempt)
        self.query_one(DecisionPanel).show(view)
        self.query_one("#request-head", Static).update(request_renderable(view))
        self._show_body("#request-body", view.sent.body)
        self.query_one("#response-head", Static).update(response_renderable(view))
        received = view.received
        self._show_body("#response-body", received.body if received else None)
        self.show_llm(attempt, step)
        step_events = tuple(event_view(event) for event in step.events)
        execution_events = tuple(event_view(event) for event in detail.events)
        self.query_one("#events-body", Static).update(
            events_renderable(view, step.step_id, step_events, execution_events)
        )
        self.query_one(TimelineView).show(step, detail, selected_n=attempt.n)
        self.query_one("#diff-body", Static).update(diff_renderable(step, attempt.n))
        tabs = self.query_one("#detail-tabs", TabbedContent)
        tabs.get_tab("tab-llm").label = f"LLM ({len(view.llm_calls)})"
        other_events = len(view.events)
        events_label = "Backoff & events" + (f" ({other_events})" if other_events else "")
        tabs.get_tab("tab-events").label = events_label
        self.query_one("#detail-switcher", ContentSwitcher).current = "detail-tabs"

    def show_llm(self, attempt: AttemptRecord, step: StepRecord) -> None:
        """Fill the LLM tab; while the calls' texts are still being read, say so."""
        llm_area = self.query_one("#llm-text", LongTextArea)
        if step_calls_without_texts(step):
            llm_area.load_text("Reading the prompts and answers from the store…")
            return
        calls = (*attempt.llm_calls, *step.llm_calls)
        size = sum(len(call.request_body or b"") + len(call.raw_text or "") for call in calls)

        def text() -> str:
            step_calls = tuple(llm_call_view(call) for call in step.llm_calls)
            attempt_calls = tuple(llm_call_view(call) for call in attempt.llm_calls)
            return llm_text(attempt_calls, step_calls)

        llm_area.load_long_text_from(text, size)

    def _show_body(self, selector: str, body: BodyDisplay | None) -> None:
        area = self.query_one(selector, TextArea)
        display = body or body_display(None)
        area.language = display.language
        area.load_text(printable(display.shown))

    def show_tab(self, tab_id: str) -> None:
        """Switch to the tab `tab_id` (one of TAB_IDS)."""
        self.query_one("#detail-tabs", TabbedContent).active = tab_id
