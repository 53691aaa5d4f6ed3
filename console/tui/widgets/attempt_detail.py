"""The detail pane of one attempt: decision, request, response, LLM calls, backoff and events."""

from __future__ import annotations

from textual import on
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
from console.render.views import (
    AttemptView,
    BodyDisplay,
    attempt_view,
    body_display,
    event_view,
    llm_call_view,
)
from console.tui.widgets.decision_panel import DecisionPanel
from console.tui.widgets.diff_view import diff_renderable
from console.tui.widgets.long_text import LongTextArea
from console.tui.widgets.searchable import SearchableStatic
from console.tui.widgets.timeline_view import TimelineView
from store.queries import AttemptRecord, ExecutionDetail, StepRecord
from store.records import step_calls_without_texts

TAB_IDS = ("tab-decision", "tab-request", "tab-response", "tab-llm", "tab-events",
           "tab-timeline", "tab-diff")


# The tabs, in order, with their labels before an attempt is shown.
TAB_LABELS = dict(zip(TAB_IDS, ("Decision", "Request", "Response", "LLM", "Backoff & events",
                                 "Timeline", "Diff"), strict=True))  # fmt: skip
FIRST_TAB = "tab-decision"


def mount_pane_content(pane: TabPane, tab_id: str) -> None:
    """Mount the widgets of the tab `tab_id` (not the Decision's) in `pane`, empty until an
    attempt fills them; they can be queried and filled as soon as this returns."""
    if tab_id in ("tab-request", "tab-response"):
        side = tab_id.removeprefix("tab-")
        pane.mount(SearchableStatic(id=f"{side}-head", classes="detail-head"),
                   LongTextArea.code_editor(read_only=True, id=f"{side}-body",
                                            classes="detail-body"))  # fmt: skip
    elif tab_id == "tab-llm":
        pane.mount(LongTextArea(read_only=True, soft_wrap=True, id="llm-text"))
    else:
        scroll = VerticalScroll(classes="detail-scroll")
        pane.mount(scroll)
        scroll.mount(TimelineView(id="timeline-body") if tab_id == "tab-timeline" else
                     SearchableStatic(id=f"{tab_id.removeprefix('tab-')}-body"))  # fmt: skip


class AttemptDetail(Vertical):
    """Tabs for the selected attempt, or a note when the step has no attempt to show.

    Only the Decision tab's widgets are built when the pane opens; each other tab's are built
    and filled the first time it is shown (`built_tabs`), so opening an execution mounts and
    styles one tab, not seven.
    """

    ALLOW_MAXIMIZE = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.built_tabs: set[str] = {FIRST_TAB}
        # What the tabs show: the attempt, its step, the execution and the attempt's view.
        self._shown: tuple[AttemptRecord, StepRecord, ExecutionDetail, AttemptView] | None = None

    def compose(self) -> ComposeResult:
        with ContentSwitcher(initial="detail-note", id="detail-switcher"):
            yield Static("Select an attempt.", id="detail-note")
            with TabbedContent(id="detail-tabs", initial=FIRST_TAB):
                for tab_id, label in TAB_LABELS.items():
                    with TabPane(label, id=tab_id):
                        if tab_id == FIRST_TAB:
                            yield DecisionPanel(id="decision-panel", classes="detail-scroll")

    def build_tab(self, tab_id: str) -> None:
        """Build the widgets of `tab_id` if they are not yet, and fill them."""
        if tab_id in self.built_tabs or tab_id not in TAB_LABELS:
            return
        self.built_tabs.add(tab_id)
        mount_pane_content(self.query_one(f"#{tab_id}", TabPane), tab_id)
        self._fill(tab_id)

    @on(TabbedContent.TabActivated, "#detail-tabs")
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id is not None:
            self.build_tab(event.pane.id)

    def show_note(self, text: str) -> None:
        """Show `text` instead of the tabs."""
        self.query_one("#detail-note", Static).update(text)
        self.query_one("#detail-switcher", ContentSwitcher).current = "detail-note"

    def show_attempt(
        self, attempt: AttemptRecord, step: StepRecord, detail: ExecutionDetail
    ) -> None:
        """Fill the built tabs from the view of `attempt` (the same view `explain` prints)."""
        view = attempt_view(attempt)
        self._shown = (attempt, step, detail, view)
        for tab_id in TAB_IDS:
            self._fill(tab_id)
        tabs = self.query_one("#detail-tabs", TabbedContent)
        tabs.get_tab("tab-llm").label = f"LLM ({len(view.llm_calls)})"
        other_events = len(view.events)
        events_label = "Backoff & events" + (f" ({other_events})" if other_events else "")
        tabs.get_tab("tab-events").label = events_label
        self.query_one("#detail-switcher", ContentSwitcher).current = "detail-tabs"

    def _fill(self, tab_id: str) -> None:
        """Fill the tab `tab_id` from the shown attempt, when it is built."""
        if self._shown is None or tab_id not in self.built_tabs:
            return
        attempt, step, detail, view = self._shown
        if tab_id == "tab-decision":
            self.query_one(DecisionPanel).show(view)
        elif tab_id == "tab-request":
            self.query_one("#request-head", Static).update(request_renderable(view))
            self._show_body("#request-body", view.sent.body)
        elif tab_id == "tab-response":
            self.query_one("#response-head", Static).update(response_renderable(view))
            received = view.received
            self._show_body("#response-body", received.body if received else None)
        elif tab_id == "tab-llm":
            self.show_llm(attempt, step)
        elif tab_id == "tab-events":
            step_events = tuple(event_view(event) for event in step.events)
            execution_events = tuple(event_view(event) for event in detail.events)
            self.query_one("#events-body", Static).update(
                events_renderable(view, step.step_id, step_events, execution_events)
            )
        elif tab_id == "tab-timeline":
            self.query_one(TimelineView).show(step, detail, selected_n=attempt.n)
        elif tab_id == "tab-diff":
            self.query_one("#diff-body", Static).update(diff_renderable(step, attempt.n))

    def show_llm(self, attempt: AttemptRecord, step: StepRecord) -> None:
        """Fill the LLM tab (once it is built); while the calls' texts are still being read,
        say so. `step` may carry texts read since the attempt was shown: they are kept."""
        if self._shown is not None:
            _attempt, _step, detail, view = self._shown
            self._shown = (attempt, step, detail, view)
        if "tab-llm" not in self.built_tabs:
            return
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
        """Switch to the tab `tab_id` (one of TAB_IDS), building it first if need be."""
        self.build_tab(tab_id)
        self.query_one("#detail-tabs", TabbedContent).active = tab_id
