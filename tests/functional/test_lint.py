"""`truva-console lint` on stores recorded from real runs (demo tools, scripted loopback tools)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.entry import main
from tests.support.demo_store import record_demo_store
from tests.support.plans import capability, plan, step, write_plan
from tests.support.tool_server import ScriptedToolServer, ToolReply


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    """Every demo plan's run (recorded once per test process; this module's copy)."""
    return record_demo_store(Path(tmp_path_factory.mktemp("lint")) / "demo.duckdb")


def _lint(db: Path, capsys, *args: str) -> tuple[int, dict]:
    code = main(["lint", "--db", str(db), "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def _check(card: dict, check: str) -> dict:
    return next(item for item in card["checks"] if item["check"] == check)


def test_lint_flags_the_demo_tool_that_answers_503_for_an_input_error(demo_db, capsys):
    code, report = _lint(demo_db, capsys)
    assert code == 1
    cards = {card["tool"]: card for card in report["tools"]}
    weather = cards["weather"]
    assert weather["grade"] == "fail"
    check = _check(weather, "input_error_status")
    assert check["grade"] == "fail" and check["counts"]["fail"] >= 1
    assert check["example"]["http_status"] == 503
    assert "location not found" in check["example"]["message"]
    assert cards["stocks"]["grade"] == "pass"


def test_lint_of_one_tool_and_its_text_card(demo_db, capsys):
    assert main(["lint", "--db", str(demo_db), "--tool", "stocks"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("stocks: pass")
    assert "Retry-After on 429" in out and "weather" not in out


def test_an_unknown_tool_is_one_line_and_exit_2(demo_db, capsys):
    assert main(["lint", "--db", str(demo_db), "--tool", "nope"]) == 2
    err = capsys.readouterr().err
    assert "--tool nope: no recorded response" in err and err.count("\n") == 1


def _record(tmp_path: Path, reply: ToolReply) -> Path:
    db = tmp_path / "store.duckdb"
    with ScriptedToolServer() as tool:
        tool.script("/capabilities/lookup", reply)
        document = plan(tool.base_url, {"lookup": capability("lookup")},
                        [step("step-1", "lookup", {"city": "Tokio"})],
                        config={"max_attempts": 2})
        assert main(["run", "--db", str(db), str(write_plan(tmp_path, document))]) == 0
    return db


@pytest.mark.parametrize(
    ("reply", "check", "grade"),
    [
        (ToolReply.error(503, "MISSING_FIELD", "required field missing: country",
                         category="SERVICE_ERROR"), "input_error_status", "fail"),
        (ToolReply.error(400, "MISSING_FIELD", "required field missing: country",
                         category="INPUT_ERROR", retryable=True), "input_error_status", None),
        (ToolReply.error(400, "MISSING_FIELD", "required field missing: country",
                         category="INPUT_ERROR", retryable=True), "retryable", "pass"),
        (ToolReply.error(502, "UPSTREAM", "Amadeus: invalid API key"), "auth_status", "fail"),
    ],
    ids=["503-for-missing-field", "400-not-graded-as-transient", "400-with-retryable",
         "auth-as-502"],
)
def test_a_loopback_tool_is_graded_from_what_it_answered(tmp_path, capsys, reply, check, grade):
    db = _record(tmp_path, reply)
    capsys.readouterr()
    _, report = _lint(db, capsys)
    (card,) = report["tools"]
    checks = {item["check"]: item for item in card["checks"]}
    if grade is None:
        assert check not in checks
    else:
        assert checks[check]["grade"] == grade
