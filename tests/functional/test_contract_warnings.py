"""Tool-contract warnings where you look: `ls --warning`, `explain`, the TUI's badges and the
`warn:` filter, on a store recorded by `truva-console run` against loopback tools."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from console.entry import main
from console.tui.screens.execution import ExecutionScreen
from console.tui.widgets.filter_bar import FilterSyntaxError, parse_filter
from console.tui.widgets.tables import AttemptTable, ExecutionTable, StepTable
from tests.support.plans import capability, plan, run_cli, step, write_plan
from tests.support.tool_server import ScriptedToolServer, ToolReply
from tests.support.tui import open_execution, screen_loaded, settle_until, static_text, tui_app
from tests.support.tui import table_cell as cell

SIZE = (120, 36)
FLOWER_MOUND = "location not found: Flower Mound"


@dataclass(frozen=True, slots=True)
class WarnedStore:
    db: Path
    misclassified: str  # seed 000 Scenario D: 503 with an input error, three times
    clean: str  # a 200 with a JSON object
    false_success: str  # 200 with success:false


@pytest.fixture(scope="module")
def warned(tmp_path_factory: pytest.TempPathFactory) -> WarnedStore:
    directory = tmp_path_factory.mktemp("warned")
    db = directory / "debug.duckdb"
    with pytest.MonkeyPatch.context() as env:
        for name in list(os.environ):
            if name.startswith(("TRUVAG3_", "OPENAI_", "TRUVA_", "OTEL_")):
                env.delenv(name)
        with ScriptedToolServer() as tools:
            tools.script("/capabilities/weather", *[ToolReply(status=503, body=FLOWER_MOUND)] * 3)
            tools.script("/capabilities/quote", ToolReply.ok({"price": 1.5}))
            tools.script("/capabilities/order", ToolReply(status=200, body={
                "success": False, "error": {"code": "OUT_OF_STOCK", "message": "none left"}}))
            capabilities = {name: capability(name) for name in ("weather", "quote", "order")}
            ids = []
            for index, (name, query) in enumerate((("weather", "Weather in Flower Mound"),
                                                   ("quote", "Quote"), ("order", "Order"))):
                document = plan(tools.base_url, capabilities, [step("step-1", name, {"q": 1})],
                                query=query)
                result = run_cli("--db", str(db), "run",
                                 str(write_plan(directory, document, f"p{index}.json")), "--json")
                assert result.json()["execution_id"], result.stderr
                ids.append(result.json()["execution_id"])
    return WarnedStore(db, *ids)


def _listed(result) -> list[str]:
    return [line.split()[0] for line in result.stdout.splitlines()[1:-1]]


def test_ls_warning_lists_the_executions_with_a_contract_warning(warned: WarnedStore) -> None:
    result = run_cli("--db", str(warned.db), "ls", "--warning")
    assert result.code == 0, result.stderr
    assert _listed(result) == [warned.false_success, warned.misclassified]
    assert " ⚠3 " in next(line for line in result.stdout.splitlines()
                          if line.startswith(warned.misclassified))  # fmt: skip
    only_d = run_cli("--db", str(warned.db), "ls", "--warning", "transient_input_error")
    assert _listed(only_d) == [warned.misclassified]
    none = run_cli("--db", str(warned.db), "ls", "--warning", "success_true_on_error")
    assert none.code == 0 and none.stdout == "no executions match these filters\n"
    everything = run_cli("--db", str(warned.db), "ls", "--json")
    counts = {row["execution_id"]: row["contract_warnings"] for row in everything.json()[
        "executions"]}  # fmt: skip
    assert counts == {warned.misclassified: 3, warned.clean: 0, warned.false_success: 1}


def test_ls_warning_rejects_an_unknown_kind(warned: WarnedStore, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--db", str(warned.db), "ls", "--warning", "sucess_false"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.startswith(
        "truva-console ls: --warning: invalid choice 'sucess_false' (choose from ")


def test_explain_shows_the_warning_under_the_response(warned: WarnedStore) -> None:
    result = run_cli("--db", str(warned.db), "explain", warned.misclassified)
    lines = [line.strip() for line in result.stdout.splitlines() if "tool contract" in line]
    assert len(lines) == 6  # not JSON, and an input error on a transient status, three times
    assert lines[1] == (
        'warning     ⚠ tool contract: HTTP 503 is transient, so the same request is resent, '
        'but the body describes an input error ("location not found: Flower Mound"): '
        "resending cannot fix it; the tool should answer 400 or 422 with error.retryable and a "
        "hint"
    )


def test_the_warn_filter_token() -> None:
    parsed = parse_filter("warn:any status:failed")
    assert parsed.filters.warning == "any"
    assert parsed.ls_args == ("--status", "failed", "--warning", "any")
    assert parse_filter("warn:body_not_json").filters.warning == "body_not_json"
    with pytest.raises(FilterSyntaxError, match="filter warn:nope: expected any or one of"):
        parse_filter("warn:nope")


async def test_badges_on_the_execution_row_the_step_and_the_attempt(warned: WarnedStore) -> None:
    app = tui_app(warned.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        table = app.screen.query_one(ExecutionTable)
        assert cell(table, warned.misclassified, "status") == "failed ⚠3"
        assert cell(table, warned.clean, "status") == "succeeded"
        assert cell(table, warned.false_success, "status") == "succeeded ⚠1"
        screen = await open_execution(app, pilot, warned.misclassified)
        assert isinstance(screen, ExecutionScreen)
        assert cell(screen.query_one(StepTable), "step-1", "status") == "failed ⚠3"
        assert cell(screen.query_one(AttemptTable), "2", "http") == "503 ⚠2"
        summary = static_text(screen, "#execution-summary", width=300)
        assert "⚠ 6 tool-contract warnings: HTTP 503 came with a body that is not JSON" in summary
        decision = static_text(screen, "#decision-body", width=300)
        assert decision.startswith("⚠ tool contract: HTTP 503 came with a body that is not JSON")
        await pilot.press("3")
        response = static_text(screen, "#response-head", width=300)
        assert "contract      ⚠ HTTP 503 came with a body" in response
        assert "⚠ HTTP 503 is transient, so the same request is resent" in response


async def test_typing_warn_in_the_filter_bar_lists_only_warned_executions(
    warned: WarnedStore,
) -> None:
    app = tui_app(warned.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        await pilot.press("slash", *"warn:success_false_on_2xx", "enter")
        table = app.screen.query_one(ExecutionTable)
        await settle_until(pilot, lambda: table.row_count == 1, "the filtered list")
        assert table.highlighted_key() == warned.false_success
        assert app.screen.sub_title.endswith("ls --warning success_false_on_2xx")
