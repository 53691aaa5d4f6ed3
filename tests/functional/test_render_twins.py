"""`explain` and the TUI's attempt detail draw one view model: every field shows in both."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static, TextArea

from console.render.views import attempt_view, llm_call_view, step_view
from store.queries import open_store
from tests.support.plans import run_cli
from tests.support.tui import TRIP, open_execution, shown_text, tui_app

# (step, attempt): a corrected attempt with an LLM call, a 429 with a backoff and headers, a
# guard rejection that sent nothing, a non-UTF-8 body that stopped the step.
ATTEMPTS = [("step-2", 1), ("step-1", 1), ("step-5", 1), ("step-3", 1)]
# The decision's other inputs are folded under "all inputs"; the request diff is its own tab.
PANES = ("#decision-body", "#decision-other-inputs", "#request-head", "#response-head",
         "#events-body", "#diff-body")
AREAS = ("#request-body", "#response-body", "#llm-text")


def flat(text: str) -> str:
    """Whitespace collapsed, so wrapping and indentation do not count."""
    return " ".join(text.split())


def _missing(fields: tuple[tuple[str, str], ...], shown: str) -> list[tuple[str, str]]:
    return [(label, value) for label, value in fields if flat(value) not in shown]


@pytest.mark.parametrize(("step_id", "n"), ATTEMPTS, ids=[f"{s}#{n}" for s, n in ATTEMPTS])
async def test_explain_and_the_attempt_detail_show_every_field_of_the_view(
    synthetic_db: Path, step_id: str, n: int
) -> None:
    step = open_store(synthetic_db).get_execution(TRIP).step(step_id)
    attempt = next(a for a in step.attempts if a.n == n)
    view = attempt_view(attempt)
    fields = view.fields() + step_view(step).fields()
    call_fields = tuple(row for call in view.llm_calls for row in call.fields())
    if step_id == "step-2":
        assert call_fields and any(label == "parsed answer" for label, _ in call_fields)

    explained = run_cli("--db", str(synthetic_db), "explain", TRIP, step_id)
    assert explained.code == 0, explained.stderr
    text = flat(explained.stdout)

    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=(200, 50)) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        screen.select_step(step_id)
        screen.select_attempt(n)
        await pilot.press(*"234567")  # each tab is built the first time it is shown
        await app.workers.wait_for_complete()  # the step's LLM texts are read in a worker
        await pilot.pause()
        parts = [shown_text(screen.query_one(s, Static).content, 2000) for s in PANES]
        parts += [screen.query_one(s, TextArea).text for s in AREAS]
        parts.append(shown_text(screen.query_one("#step-summary", Static).content, 2000))
    tui = flat("\n".join(parts))

    assert _missing(fields + call_fields, text) == []
    assert _missing(fields + call_fields, tui) == []


def test_an_llm_call_view_lists_its_settings_prompts_and_answers(synthetic_db: Path) -> None:
    step = open_store(synthetic_db).get_execution(TRIP).step("step-2")
    call = llm_call_view(step.attempts[0].llm_calls[0])
    labels = [label for label, _ in call.fields()]
    assert labels[:9] == ["site", "model", "status", "usage", "latency", "at", "endpoint",
                          "temperature", "max_tokens"]  # fmt: skip
    assert "raw response" in labels and "parsed answer" in labels
    assert any(label.startswith("prompt (") for label in labels)
