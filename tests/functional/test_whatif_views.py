"""The what-if and lint view data the CLI prints and the TUI draws, on a demo-run store."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.cli.lint import render_cards
from console.cli.whatif import render_report
from console.lint import lint_store
from console.render.lint_view import card_views, cards_text
from console.render.whatif_view import replay_arguments, whatif_text, whatif_view
from console.whatif import what_if
from store.queries import open_store
from tests.support.demo_store import execution_of, record_demo_store
from tests.support.plans import run_cli


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    return record_demo_store(Path(tmp_path_factory.mktemp("views")) / "demo.duckdb")


def test_progress_counts_executions_and_decisions_and_an_error_it_raises_stops_the_run(
    demo_db: Path,
) -> None:
    seen: list[tuple[int, int, int]] = []
    report = what_if(open_store(demo_db), None, {"max_attempts": 5},
                     progress=lambda done, r: seen.append((done, r.executions, r.decisions)))
    assert seen and seen[-1] == (report.executions, report.executions, report.decisions)
    assert report.executions == 14
    assert seen == sorted(seen)  # counts only grow

    class Stop(Exception):
        pass

    def stop(done, report):
        raise Stop

    with pytest.raises(Stop):
        what_if(open_store(demo_db), None, {"max_attempts": 5}, progress=stop)


def test_the_cli_prints_the_view_and_the_replay_command_names_the_change(demo_db: Path) -> None:
    report = what_if(open_store(demo_db), None, {"max_attempts": 5})
    view = whatif_view(report)
    assert render_report(report) == whatif_text(view)
    assert view.headline.startswith("what-if under config max_attempts=5: ")
    scenario_d = execution_of(demo_db, "scenario-d-misclassified-503")
    change = next(c for c in view.changes if c.execution_id == scenario_d)
    assert replay_arguments(change, view.overrides) == [
        "replay", scenario_d, "step-1", "--config", "max_attempts=5"]  # fmt: skip


def test_the_lint_cli_prints_the_card_views(demo_db: Path) -> None:
    cards = lint_store(open_store(demo_db))
    views = card_views(cards)
    assert render_cards(cards) == cards_text(views)
    weather = next(v for v in views if v.tool == "weather")
    line = next(line for line in weather.checks if line.check == "input_error_status")
    assert weather.heading.startswith("weather: FAIL — 22 responses")
    assert line.example is not None and line.example.status == 503
    assert line.example_text.startswith(f"{line.example.execution_id} step-1 #1 (HTTP 503): ")


@pytest.mark.parametrize(
    ("store_argv", "named"),
    [(["--samples"], "truva-console --samples replay"), ([], "truva-console --db {db} replay")],
    ids=["samples", "db"],
)
def test_the_replay_hint_names_the_store_the_whatif_read(
    demo_db: Path, store_argv: list[str], named: str
) -> None:
    argv = store_argv or ["--db", str(demo_db)]
    result = run_cli(*argv, "whatif", "--config", "max_attempts=5")
    assert result.code == 0, result.stderr
    assert f"Replay a step to find out: {named.format(db=demo_db)} EXECUTION STEP" in result.stdout
