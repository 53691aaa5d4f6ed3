"""Argument errors of every command: one stderr line naming command, option and value; exit 2."""

from __future__ import annotations

import pytest

from console.entry import main
from tests.support.plans import run_subprocess

# (argv, the one stderr line)
CASES = {
    "ls-bad-choice": (
        ["ls", "--status", "nope"],
        "truva-console ls: --status: invalid choice 'nope' (choose from running, succeeded, "
        "partial, failed, cancelled, interrupted)",
    ),
    "ls-bad-int": (["ls", "--limit", "x"], "truva-console ls: --limit: invalid int value: 'x'"),
    "ls-unknown-option": (["ls", "--bogus"], "truva-console ls: unrecognized arguments: --bogus"),
    "explain-missing-argument": (
        ["explain"], "truva-console explain: the following arguments are required: EXECUTION",
    ),
    "replay-missing-arguments": (
        ["replay"], "truva-console replay: the following arguments are required: EXECUTION, STEP",
    ),
    "replay-unknown-option": (
        ["replay", "e", "s", "--frob", "1"],
        "truva-console replay: unrecognized arguments: --frob 1",
    ),
    "demo-bad-action": (
        ["demo", "nope"],
        "truva-console demo: ACTION: invalid choice 'nope' (choose from serve, record, plans, "
        "rerecord)",
    ),
    "whatif-option-without-value": (
        ["whatif", "--config"], "truva-console whatif: --config: expected one argument",
    ),
    "top-level-unknown-option": (["--frob"], "truva-console: unrecognized arguments: --frob"),
    "top-level-bad-command": (
        ["nope"], "truva-console: COMMAND: invalid choice 'nope' (choose from run, publish, ls, "
        "explain, demo, replay, export, import, rerun, sql, whatif, lint, probe)",
    ),
}


@pytest.mark.parametrize(("argv", "line"), CASES.values(), ids=CASES.keys())
def test_an_argument_error_is_one_line_and_exit_2(argv, line, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    captured = capsys.readouterr()
    assert stopped.value.code == 2
    assert captured.err.splitlines() == [line]
    assert captured.out == ""


def test_the_script_prints_one_line_for_a_bad_choice() -> None:
    result = run_subprocess("ls", "--status", "nope")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [CASES["ls-bad-choice"][1]]


def test_help_still_prints_the_usage(capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["ls", "--help"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out.startswith("usage: truva-console ls [-h]")
