"""Peak memory of `truva-console run` on long plans with the store on, against a loopback tool.

    python bench/bench_run_memory.py [--steps 1000 4000] [--source DIR]

Each plan has N independent steps calling one loopback tool that answers 200 at once. The run
is a child process (`truva-console run PLAN --db …`) that prints its own peak RSS (VmHWM) at
exit; `--source DIR` runs another checkout's code (e.g. an export of main) for a comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.tool_server import ScriptedToolServer, ToolReply  # noqa: E402

CHILD = """
import sys
from console.entry import main
rc = main(sys.argv[1:])
hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:'))
print('PEAK', int(hwm.split()[1]) // 1024, file=sys.stderr)
raise SystemExit(rc)
"""


def long_plan(base_url: str, steps: int) -> dict:
    return {
        "query": "a long plan",
        "tools": {"demo": {"base_url": base_url}},
        "capabilities": {"demo.work": {"path": "/capabilities/work", "description": "work"}},
        "steps": [
            {"id": f"step-{i}", "tool": "demo", "capability": "work", "parameters": {"i": i}}
            for i in range(1, steps + 1)
        ],
        "config": {"initial_delay_ms": 1, "max_delay_ms": 5},
    }


def measure(
    steps: int, source: Path, work: Path, base_url: str, *, store: bool = True
) -> tuple[int, float, int, str]:
    """Peak RSS (MiB), wall seconds, executions' attempt rows stored, and the exit status."""
    plan_path = work / f"plan-{steps}.json"
    plan_path.write_text(json.dumps(long_plan(base_url, steps)))
    db = work / f"run-{steps}-{source.name}.duckdb"
    env = {**os.environ, "PYTHONPATH": str(source)}
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", CHILD, "run", str(plan_path),
         *(("--db", str(db)) if store else ("--no-store",))],
        capture_output=True, text=True, env=env, cwd=work,
    )  # fmt: skip
    seconds = time.monotonic() - started
    peak = next(
        (int(line.split()[1]) for line in result.stderr.splitlines() if line.startswith("PEAK")), -1
    )
    import duckdb

    stored = -1
    if db.exists():
        subprocess.run(
            [sys.executable, "-c", "import sys; from console.entry import main; "
             "raise SystemExit(main(['ls', '--db', sys.argv[1]]))", str(db)],
            capture_output=True, env=env, cwd=work,
        )  # fmt: skip
        conn = duckdb.connect(str(db), read_only=True)
        stored = conn.execute("SELECT count(*) FROM attempts").fetchone()[0]
        conn.close()
    first_stderr = next((line for line in result.stderr.splitlines() if "PEAK" not in line), "")
    return peak, seconds, stored, f"exit {result.returncode} {first_stderr[:80]}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 4000])
    parser.add_argument("--source", type=Path, default=ROOT, help="checkout whose code runs")
    parser.add_argument("--no-store", action="store_true", help="run without the recorder")
    args = parser.parse_args()
    with ScriptedToolServer() as tool, tempfile.TemporaryDirectory() as tmp:
        tool.script("/capabilities/work", ToolReply.ok({"done": True}))
        for steps in args.steps:
            peak, seconds, stored, status = measure(
                steps, args.source, Path(tmp), tool.base_url, store=not args.no_store
            )
            label = f"{args.source}{' (no store)' if args.no_store else ''}"
            print(f"{label}: {steps:6d} steps  peak RSS {peak:5d} MiB  {seconds:6.1f} s  "
                  f"{stored} attempts stored  {status}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
