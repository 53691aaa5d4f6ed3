"""The Decision tab: verdict, the inputs the deciding rule read, why not, and all inputs folded.

What it shows is the attempt's view (`console.render.views`), drawn by
`console.render.rich_views.decision_renderable`, the same view `explain` prints.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Collapsible, Static

from console.render.rich_views import decision_renderable, pairs_renderable
from console.render.views import AttemptView
from console.tui.widgets.searchable import SearchableStatic


class DecisionPanel(VerticalScroll):
    """The decision of one attempt; the inputs its rule did not read are folded away."""

    def compose(self) -> ComposeResult:
        yield SearchableStatic(id="decision-body")
        with Collapsible(title="all inputs", collapsed=True, id="decision-all-inputs"):
            yield SearchableStatic(id="decision-other-inputs")

    def show(self, view: AttemptView) -> None:
        """Fill the panel from the view of an attempt."""
        self.query_one("#decision-body", Static).update(decision_renderable(view))
        folded = self.query_one("#decision-all-inputs", Collapsible)
        other = view.decision.other_inputs if view.decision.recorded else ()
        folded.display = bool(other)
        folded.title = f"all inputs ({len(other)} more)"
        self.query_one("#decision-other-inputs", Static).update(pairs_renderable(other))
