"""`bench/run_all.py` runs a measure group end to end and prints its rows (no timing is judged)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_run_all_quick_prints_the_header_and_its_rows() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run_all.py"), "--quick", "--only", "plan_scale"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    lines = result.stdout.splitlines()
    assert lines[0].startswith("truva-console bench (quick): "), result.stdout + result.stderr
    assert lines[1].split()[:7] == ["measure", "unit", "figure", "baseline", "ratio", "floor",
                                    "goal"]  # fmt: skip
    rows = [line for line in lines if line.startswith(("per-step cost", "chain ÷ independent"))]
    assert len(rows) == 2, result.stdout
    for row in rows:  # a measured row has numbers and a verdict; a broken one says "-"
        assert row.split()[-1] in ("PASS", "FAIL", "goal)"), row
        assert " - " not in row, result.stdout
    assert lines[-1].endswith("* marks the value judged)"), result.stdout
    assert result.returncode in (0, 1), result.stderr
