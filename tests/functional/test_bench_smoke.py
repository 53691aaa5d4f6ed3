"""`bench/run_all.py --smoke` runs every measure group at a tiny size and prints each row with
figures (no timing is judged: a smoke's verdicts mean nothing, only that no group broke)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import measures, run_all
from bench.run_all import GROUPS, ROWS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.serial  # the bench's timed measures, their children on both cores
def test_smoke_runs_every_group_and_prints_each_row_with_its_figures() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run_all.py"), "--smoke"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    lines = result.stdout.splitlines()
    assert lines[0].startswith("truva-console bench (smoke): "), result.stdout + result.stderr
    assert lines[1].split()[:7] == ["measure", "unit", "figure", "baseline", "ratio", "floor",
                                    "goal"]  # fmt: skip
    assert len(GROUPS) == 10 and len(ROWS) == 13
    for row in ROWS:
        printed = [line for line in lines if line.startswith(row.title)]
        assert len(printed) == 1, f"{row.group}: no row {row.title!r}\n{result.stdout}"
        # a measured row has numbers and a verdict; a broken group prints "-" and FAIL
        assert " - " not in printed[0], f"{row.group} broke:\n{result.stdout}"
        assert printed[0].split()[-1] in ("PASS", "FAIL", "goal)"), printed[0]
    assert lines[-1].endswith("* marks the value judged)"), result.stdout
    assert result.returncode in (0, 1), result.stderr


def test_a_smoke_group_that_raises_prints_fail_rows_naming_the_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(quick: measures.Size, work: Path) -> dict[str, measures.Figure]:
        raise KeyError("per_step")

    monkeypatch.setitem(measures.MEASURES, "plan_scale", broken)
    assert run_all.child_main(["plan_scale", "text_search"], "smoke", tmp_path) == 0
    ran = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert ran["plan_scale"]["rows"] == {}
    assert ran["plan_scale"]["problem"] == "KeyError: 'per_step'"
    assert set(ran["text_search"]["rows"]) == {"text_search"}, ran  # the next group still ran
