"""`truva-console explain` as the text twin of the execution screen's timeline, diff, decision
and warnings, on the synthetic store."""

from __future__ import annotations

import pytest

from console.cli import explain
from console.printable import printable
from store.queries import open_store
from tests.support.plans import run_cli
from tests.support.tui import EXHAUSTED, SMALL, TRIP, record_synthetic_store


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(record_synthetic_store(tmp_path_factory.mktemp("explain") / "debug.duckdb"))


def test_explain_timeline_draws_the_execution_then_each_step(db: str, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    result = run_cli("--db", db, "explain", EXHAUSTED, "--timeline")
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"execution {EXHAUSTED}  failed"
    assert lines[2].startswith("execution  0─") and lines[2].endswith("1.67 s")
    assert "wait 542 ms planned · 542 ms actual · backoff" in result.stdout
    assert "503 in 12 ms → stop_budget" in result.stdout
    assert lines[-1].startswith("█ attempt  ▓ LLM call  ▒ wait")
    assert max(len(line) for line in lines) <= 80


def test_explain_timeline_of_one_step_draws_the_step_then_the_execution(db: str) -> None:
    result = run_cli("--db", db, "explain", TRIP, "step-2", "--timeline")
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Step step-2" and lines[1].startswith("step-2     0─")
    execution = lines.index("Execution")
    assert lines[execution + 1].startswith("execution  0─")
    assert "LLM error_analysis 800 ms HTTP 200" in "\n".join(lines[:execution])
    lanes = [line[:11] for line in lines[execution:] if line.startswith(("▶", "step-"))]
    assert lanes[:3] == ["step-1     ", "▶ step-2   ", "step-3     "]


def test_explain_prints_the_inputs_the_rule_read_apart(db: str) -> None:
    result = run_cli("--db", db, "explain", TRIP, "step-1")
    assert result.code == 0, result.stderr
    read = next(line for line in result.stdout.splitlines() if line.strip().startswith("read "))
    assert "status=429" in read and "attempt_number=1" in read and "side_effects" not in read
    rest = result.stdout.split(read, 1)[1]
    assert rest.lstrip().startswith("inputs ") and "side_effects=none" in rest


def test_explain_shows_what_the_correction_changed_and_who_proposed_it(db: str) -> None:
    result = run_cli("--db", db, "explain", TRIP, "step-2")
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    index = next(i for i, line in enumerate(lines) if line.strip().startswith("changed "))
    assert lines[index].split(None, 1)[1] == (
        "#1 → #2  analyzer layer, LLM call 1 of attempt #1 (error_analysis, model gpt-test)"
    )
    assert lines[index + 1].strip() == 'age: "thirty" → 30'
    resent = run_cli("--db", db, "explain", TRIP, "step-1")  # a 429 resent as it was
    assert not [line for line in resent.stdout.splitlines() if line.startswith("    changed ")]


def test_explain_json_holds_the_read_inputs_the_diffs_and_the_warnings(db: str) -> None:
    result = run_cli("--db", db, "explain", TRIP, "--json")
    assert result.code == 0, result.stderr
    steps = {step["step_id"]: step for step in result.json()["steps"]}
    first = steps["step-1"]["attempts"][0]["decision"]
    assert first["read_inputs"][:4] == ["status", "transport_error", "attempt_number",
                                        "max_attempts"]  # fmt: skip
    (diff,) = steps["step-2"]["request_diffs"]
    assert (diff["before"], diff["after"], diff["layer"]) == (1, 2, "analyzer")
    assert diff["changes"] == [{"key": "age", "old": '"thirty"', "new": "30"}]
    assert diff["proposed_by"] == steps["step-2"]["attempts"][0]["llm_calls"][0]["call_id"]
    warnings = steps["step-3"]["attempts"][0]["contract_warnings"]
    assert [w["code"] for w in warnings] == ["body_not_json"]
    assert steps["step-1"]["attempts"][0]["contract_warnings"] == []


def test_explain_timeline_with_attempt_marks_that_attempt(db: str) -> None:
    result = run_cli("--db", db, "explain", TRIP, "step-1", "--timeline", "--attempt", "2")
    assert result.code == 0, result.stderr
    marked = [line for line in result.stdout.splitlines() if line.startswith("▶")]
    assert len(marked) == 2 and marked[0].startswith("▶ #2") and "200 in 12 ms" in marked[0]
    lane = marked[1]  # the step's lane in the execution's waterfall, its attempt #2 marked
    assert lane.startswith("▶ step-1   ") and lane[len("▶ step-1   "):].count("▶") == 1


ATTEMPT_MISTAKES = {
    "no-timeline": (["step-1", "--attempt", "1"], "add --timeline"),
    "no-step": (["--timeline", "--attempt", "1"], "name the STEP it belongs to"),
    "no-such-attempt": (["step-1", "--timeline", "--attempt", "7"],
                        "step-1 has no attempt 7 (its attempts: #1, #2)"),
}  # fmt: skip


@pytest.mark.parametrize(("args", "said"), ATTEMPT_MISTAKES.values(), ids=ATTEMPT_MISTAKES.keys())
def test_explain_attempt_that_cannot_be_marked_is_one_line_and_exit_2(
    db: str, args: list[str], said: str
) -> None:
    result = run_cli("--db", db, "explain", TRIP, *args)
    assert result.code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and said in result.stderr
    assert result.stderr.startswith(f"truva-console: explain: --attempt {args[-1]}: ")


@pytest.mark.parametrize("execution_id", [TRIP, SMALL, EXHAUSTED])
def test_explain_read_a_step_at_a_time_writes_the_whole_executions_text(
    db: str, execution_id: str, monkeypatch
) -> None:
    store = open_store(db)
    detail = store.get_execution(execution_id)
    monkeypatch.setattr(explain, "STEPS_PER_READ", 1)
    parts: list[str] = []

    explain.write_explain(store, store.execution_outline(execution_id[:9]), parts.append)

    assert len(parts) >= len(detail.steps) + 1
    assert "".join(parts) == printable(explain.render_explain(detail, detail.steps))
    outline = store.execution_outline(execution_id)
    assert outline.step_ids == tuple(step.step_id for step in detail.steps)
    for step in detail.steps:
        assert store.execution_step(outline, step.step_id) == step
