"""The headless CLI twins `ls` and `explain` on a recorded store."""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path

import pytest

from console.cli import explain as cmd_explain
from console.cli import ls as cmd_ls
from console.render.formats import parse_time
from tests.support.events_factory import NON_UTF8_BODY, START_AT
from tests.support.tui import EXHAUSTED, SMALL, TRIP, record_synthetic_store


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_synthetic_store(tmp_path_factory.mktemp("cli") / "debug.duckdb")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="truva-console")
    parser.add_argument("--db")
    subparsers = parser.add_subparsers(dest="command")
    cmd_ls.add_parser(subparsers)
    cmd_explain.add_parser(subparsers)
    args = parser.parse_args(argv)
    exit_code = args.handler(args)
    captured = capsys.readouterr()
    return exit_code, captured.out, captured.err


def test_ls_table(db: Path, capsys) -> None:
    exit_code, out, err = run_cli(capsys, "--db", str(db), "ls")

    lines = out.splitlines()
    assert (exit_code, err) == (0, "")
    assert lines[0].split()[:4] == ["EXECUTION", "STATUS", "STARTED", "(UTC)"]
    assert [line.split()[0] for line in lines[1:4]] == [EXHAUSTED, SMALL, TRIP]
    trip_line = lines[3]
    for expected in ("partial", "2026-01-01 00:00:00Z", "  2/2/1  ",
                     "guard.reject_predispatch", "Plan a trip to Paris"):  # fmt: skip
        assert expected in trip_line
    assert lines[-1] == "1-3 of 3"


def test_ls_uses_truva_db_when_no_flag(db: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("TRUVA_DB", str(db))

    exit_code, out, _ = run_cli(capsys, "ls", "--json")

    assert exit_code == 0
    assert json.loads(out)["total"] == 3


LS_FILTER_CASES = [
    ("status", ["--status", "failed"], [EXHAUSTED]),
    # the twin of the list's `f` key: several statuses joined by commas, any of them
    ("several-statuses", ["--status", "failed,partial"], [EXHAUSTED, TRIP]),
    ("tool", ["--tool", "crm"], [TRIP]),
    ("capability", ["--capability", "inventory.reserve"], [EXHAUSTED]),
    ("action", ["--action", "stop_terminal"], [TRIP]),
    ("rule", ["--rule", "budget.attempts"], [EXHAUSTED]),
    ("http-status", ["--http-status", "429"], [TRIP]),
    ("since-iso", ["--since", "2026-01-01T00:01:00Z"], [EXHAUSTED, SMALL]),
    ("until-epoch", ["--until", str(START_AT + 60)], [TRIP]),
    ("text", ["--text", "Slow Down"], [TRIP]),
    ("limit-and-offset", ["--limit", "1", "--offset", "1"], [SMALL]),
]


@pytest.mark.parametrize(
    ("options", "expected"),
    [(options, expected) for _, options, expected in LS_FILTER_CASES],
    ids=[name for name, _, _ in LS_FILTER_CASES],
)
def test_ls_filters_json(db: Path, capsys, options: list[str], expected: list[str]) -> None:
    exit_code, out, _ = run_cli(capsys, "--db", str(db), "ls", *options, "--json")

    document = json.loads(out)
    assert exit_code == 0
    assert [row["execution_id"] for row in document["executions"]] == expected
    assert set(document) >= {"executions", "total"}


def test_ls_json_row_shape(db: Path, capsys) -> None:
    _, out, _ = run_cli(capsys, "--db", str(db), "ls", "--json", "--status", "partial")

    row = json.loads(out)["executions"][0]
    assert row["execution_id"] == TRIP
    assert row["incomplete_steps"] == ["step-3", "step-4", "step-5"]
    assert (row["attempts"], row["llm_calls"], row["llm_total_tokens"]) == (6, 1, 150)
    assert row["last_failing_rule"] == "guard.reject_predispatch"


def test_ls_no_match_says_so(db: Path, capsys) -> None:
    exit_code, out, _ = run_cli(capsys, "--db", str(db), "ls", "--text", "nothing like this")

    assert (exit_code, out) == (0, "no executions match these filters\n")


OUT_OF_RANGE = "expected a time between the years 1 and 9999"
TOO_MANY = "99999999999999999999"
LS_BAD_OPTION_CASES = [
    ("unparseable-time", ["--since", "yesterday-ish"],
     "--since 'yesterday-ish': expected an ISO date/time"),
    ("zero-limit", ["--limit", "0"], "--limit must be at least 1"),
    ("epoch-past-year-9999", ["--since", "1e20"], f"--since '1e20': {OUT_OF_RANGE}"),
    ("not-a-number", ["--since", "nan"], f"--since 'nan': {OUT_OF_RANGE}"),
    ("infinity", ["--until", "inf"], f"--until 'inf': {OUT_OF_RANGE}"),
    ("overflowing-float", ["--since", "1e400"], f"--since '1e400': {OUT_OF_RANGE}"),
    ("age-past-year-1", ["--since", "999999999999w"], f"--since '999999999999w': {OUT_OF_RANGE}"),
    ("huge-offset", ["--offset", TOO_MANY], f"--offset must be at least 0 and at most {2**63 - 1}"),
    ("huge-limit", ["--limit", TOO_MANY], f"--limit must be at least 1 and at most {2**63 - 1}"),
    # A misspelt rule matched nothing and said nothing (found by an outside check).
    ("misspelt-rule", ["--rule", "budget.attempt"],
     "--rule: no rule is named 'budget.attempt' (did you mean budget.attempts or"),
    ("unknown-rule", ["--rule", "retry"],
     "--rule: no rule is named 'retry' (docs/rules.md lists them)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("options", "message"),
    [(options, message) for _, options, message in LS_BAD_OPTION_CASES],
    ids=[name for name, _, _ in LS_BAD_OPTION_CASES],
)
def test_ls_bad_option_value_exits_2(db: Path, capsys, options: list[str], message: str) -> None:
    exit_code, out, err = run_cli(capsys, "--db", str(db), "ls", *options)

    assert (exit_code, out) == (2, "")
    assert err.startswith("truva-console: ") and message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("text", "now", "expected"),
    [
        ("30m", 10_000.0, 10_000.0 - 1800),
        ("2h", 10_000.0, 10_000.0 - 7200),
        ("1767225600", 0.0, 1_767_225_600.0),
        ("2026-01-01", 0.0, 1_767_225_600.0),
        ("2026-01-01T01:00:00+01:00", 0.0, 1_767_225_600.0),
    ],
    ids=["minutes-ago", "hours-ago", "epoch-seconds", "date-is-utc", "iso-with-offset"],
)
def test_parse_time(text: str, now: float, expected: float) -> None:
    assert parse_time("--since", text, now=now) == expected


def test_explain_text_attempt_by_attempt(db: Path, capsys) -> None:
    exit_code, out, err = run_cli(capsys, "--db", str(db), "explain", "exec-trip")

    assert (exit_code, err) == (0, "")
    for expected in (
        f"execution {TRIP}  partial",
        "== step step-1  weather.forecast  succeeded",
        "-- attempt 1 (policy attempt 1 of 3)",
        "sent        POST http://127.0.0.1:8101/capabilities/forecast",
        "Authorization: [REDACTED]",
        "received    HTTP 429 after 12.0 ms",
        "Retry-After: 1",
        "decision    retry_same by rule transient.retry_same",
        "reason      HTTP 429 is transient; 2 attempts left",
        "delay       1000.0 ms (retry_after_header)",
        "success.2xx: HTTP 429 is not 2xx",
        "terminal.auth_or_method: HTTP 429 is not 401, 403 or 405",
        "backoff     planned 1000.0 ms (retry_after_header), waited 1000.4 ms (finished)",
        "decision    retry_corrected by rule analyzer.accept (layer analyzer)",
        "llm call    error_analysis  model gpt-test  HTTP 200",
        "You analyze failed tool calls. Answer JSON only.",
        '"suggested_changes": {"age": 30}',
        "decision    stop_terminal by rule terminal.auth_or_method",
        f"body        {len(NON_UTF8_BODY)} bytes, not valid UTF-8: shown as base64",
        base64.b64encode(NON_UTF8_BODY).decode(),
        "skipped     dependency step-3 failed",
        "sent        nothing: the request was not dispatched",
        "decision    reject_predispatch by rule guard.reject_predispatch",
        "notice      guard.rejected: required key 'city' is missing",
        "circuit     closed->open: 5 failures in a row",
    ):
        assert expected in out, expected
    assert "sk-live" not in out


def test_explain_one_step(db: Path, capsys) -> None:
    exit_code, out, _ = run_cli(capsys, "--db", str(db), "explain", EXHAUSTED, "step-1")

    assert exit_code == 0
    assert "received    transport error connect after 12.0 ms: connection reset" in out
    assert "decision    stop_budget by rule budget.attempts" in out
    assert out.count("-- attempt") == 3


def test_explain_json_document(db: Path, capsys) -> None:
    exit_code, out, _ = run_cli(capsys, "--db", str(db), "explain", TRIP, "step-1", "--json")

    document = json.loads(out)
    assert exit_code == 0
    assert document["execution"]["execution_id"] == TRIP
    assert [step["step_id"] for step in document["steps"]] == ["step-1"]
    first = document["steps"][0]["attempts"][0]
    assert set(first) >= {"n", "sent", "received", "decision", "not_matched", "backoff",
                          "llm_calls", "events"}  # fmt: skip
    assert first["sent"]["method"] == "POST"
    assert first["sent"]["headers"]["Authorization"] == "[REDACTED]"
    assert first["sent"]["body"] == {
        "size": 28,
        "encoding": "utf-8",
        "text": '{"city": "Paris", "days": 3}',
    }
    assert first["received"]["status"] == 429
    assert first["decision"]["rule_id"] == "transient.retry_same"
    assert first["decision"]["inputs"]["status"] == 429
    assert first["not_matched"][0] == {"rule_id": "success.2xx", "reason": "HTTP 429 is not 2xx"}
    assert first["backoff"]["actual_ms"] == 1000.4


def test_explain_json_binary_body_is_base64(db: Path, capsys) -> None:
    _, out, _ = run_cli(capsys, "--db", str(db), "explain", TRIP, "step-3", "--json")

    body = json.loads(out)["steps"][0]["attempts"][0]["received"]["body"]
    assert body["encoding"] == "base64"
    assert base64.b64decode(body["text"]) == NON_UTF8_BODY


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explain", "nope"], "no execution id starts with 'nope'"),
        (["explain", "exec-"], "matches several executions"),
        (["explain", TRIP, "step-9"], "has no step 'step-9' (steps: step-1, step-2"),
    ],
    ids=["unknown-execution", "ambiguous-prefix", "unknown-step"],
)
def test_explain_bad_input_exits_2(db: Path, capsys, argv: list[str], message: str) -> None:
    exit_code, out, err = run_cli(capsys, "--db", str(db), *argv)

    assert (exit_code, out) == (2, "")
    assert err.startswith("truva-console: ") and message in err
    assert err.count("\n") == 1
