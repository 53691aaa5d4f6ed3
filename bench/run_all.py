"""Every measure of issue 12's goals table in one run, each beside its baseline: `make bench`.

Usage: .venv/bin/python bench/run_all.py [--quick | --smoke] [--only NAME[,NAME]] [--json PATH]
       [--profile NAME] [--timeout SECONDS]

Each measure group (bench/measures.py) runs in a child process of its own, one after another,
so memory and threads never carry over. One row per measure: the product's figure, the
baseline measured in the same run, their ratio, the floor and goal from the issue, and PASS or
FAIL against the floor (the row's judged value is marked *). A group that fails or runs past
`--timeout` prints FAIL rows saying why. `--quick` runs smaller sizes (the floors are the
issue's, stated for the full sizes); `--smoke` runs tiny ones, seconds in all, to show that
every group still runs and prints its rows (tests/functional/test_bench_smoke.py; its verdicts
mean nothing). `--profile NAME` runs one group in this process under
cProfile and prints the top entries by cumulative time. Exit status 1 when any row fails.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@dataclass(frozen=True, slots=True)
class Row:
    """A goals-table row: which value is judged, against which floor and goal."""

    key: str
    group: str
    title: str
    unit: str
    judged: str  # "ratio" or "figure"
    floor: float
    goal: float
    higher_is_better: bool

    def passes(self, value: float, limit: float) -> bool:
        return value >= limit if self.higher_is_better else value <= limit

    def limit_text(self, limit: float) -> str:
        sign = ">=" if self.higher_is_better else "<="
        return f"{sign} {limit:g}"


ROWS = (
    Row("executor_c1", "executor", "executor+store vs bare httpx, c=1", "ms/step", "ratio",
        0.50, 0.90, True),
    Row("executor_c8", "executor", "executor+store vs bare httpx, c=8", "ms/step", "ratio",
        0.50, 0.90, True),
    Row("per_step", "plan_scale", "per-step cost, large ÷ 100 steps", "ms/step", "ratio",
        1.3, 1.0, False),
    Row("chain", "plan_scale", "chain ÷ independent steps", "ms/step", "ratio", 2.0, 1.2, False),
    Row("run_rss", "run_memory", "peak RSS, long plan with the store", "MB", "figure",
        500, 200, False),
    Row("llm_ingest", "llm_ingest", "LLM calls (20 KB) stored/s ÷ raw Arrow", "calls/s",
        "ratio", 0.50, 0.80, True),
    Row("attempt_ingest", "attempt_ingest", "attempt rows/s ÷ raw Arrow (20 KB bodies)",
        "rows/s", "ratio", 0.50, 0.80, True),
    Row("bundle_mbps", "bundle", "bundle export+import, redaction on", "MB/s", "figure",
        50, 100, True),
    Row("bundle_rss", "bundle", "bundle import peak RSS", "MB", "figure", 300, 150, False),
    Row("console_list", "console_list", "console launch → list painted", "s", "figure",
        1.5, 0.5, False),
    Row("console_open", "console_open", "open execution, 1k attempts + 200×50 KB LLM", "s",
        "figure", 0.3, 0.1, False),
    Row("text_search", "text_search", "text search over bodies and prompts", "ms", "figure",
        500, 150, False),
    Row("tui_prompt", "tui_prompt", "scrolling a 5 MB prompt in the TUI, worst", "ms",
        "figure", 100, 100, False),
)  # fmt: skip
GROUPS = tuple(dict.fromkeys(row.group for row in ROWS))


def machine_line() -> str:
    """nproc, memory, python and duckdb versions."""
    import duckdb

    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    return (f"{os.cpu_count()} cores, {memory_gb:.1f} GB RAM, Python "
            f"{platform.python_version()}, DuckDB {duckdb.__version__}, {platform.machine()}")


SIZES = ("full", "quick", "smoke")


def run_child(groups: tuple[str, ...], size: str, work: Path,
              timeout: float) -> dict[str, tuple[dict, str, float]]:  # fmt: skip
    """Run `groups` one after another in one child; per group its rows as dicts (empty on
    failure), a problem and seconds."""
    command = [sys.executable, str(Path(__file__)), "--child", ",".join(groups),
               "--work", str(work), "--size", size]  # fmt: skip
    started = time.perf_counter()
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                cwd=ROOT)
    except subprocess.TimeoutExpired:
        seconds = time.perf_counter() - started
        return {group: ({}, f"timed out after {timeout:.0f} s", seconds) for group in groups}
    seconds = time.perf_counter() - started
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return {group: ({}, f"exit {result.returncode}: {last[:100]}", seconds)
                for group in groups}  # fmt: skip
    ran = json.loads(lines[-1])
    return {group: (ran[group]["rows"], ran[group]["problem"], ran[group]["seconds"])
            for group in groups}  # fmt: skip


def group_results(groups: tuple[str, ...], size: str, work: Path,
             timeout: float) -> Iterator[tuple[str, dict, str, float]]:  # fmt: skip
    """Each group's rows, problem and seconds: one child per group, so memory and threads never
    carry over; the smoke runs every group in one child (its imports once: seconds in all)."""
    if size == "smoke":
        ran = run_child(groups, size, work, timeout * len(groups))
        for group in groups:
            yield group, *ran[group]
        return
    for group in groups:
        yield group, *run_child((group,), size, work, timeout)[group]


def child_main(groups: list[str], size: str, work: Path) -> int:
    """Run each group here; print one JSON line of their rows (a smoke's failing group is a
    problem beside the others' rows, as a failing child is)."""
    from bench.measures import MEASURES, Size

    work.mkdir(parents=True, exist_ok=True)
    ran = {}
    for group in groups:
        started, problem, figures = time.perf_counter(), "", {}
        try:
            figures = MEASURES[group](Size[size.upper()], work)
        except Exception as error:  # a smoke reports it as the group's FAIL rows
            if size != "smoke":
                raise
            problem = f"{type(error).__name__}: {str(error)[:100]}"
        rows = {key: {"figure": f.figure, "baseline": f.baseline, "ratio": f.ratio,
                      "note": f.note} for key, f in figures.items()}  # fmt: skip
        ran[group] = {"rows": rows, "problem": problem, "seconds": time.perf_counter() - started}
    print(json.dumps(ran))
    return 0


def profile_main(group: str, size: str, work: Path, top: int = 25) -> int:
    """Run one group under cProfile here and print its top entries by cumulative time."""
    from bench.measures import MEASURES, Size

    profiler = cProfile.Profile()
    profiler.enable()
    figures = MEASURES[group](Size[size.upper()], work)
    profiler.disable()
    for key, figure in figures.items():
        print(f"{key}: {figure}")
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    print(out.getvalue())
    return 0


def _number(value: float) -> str:
    if value != value:  # NaN
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--quick", action="store_true", help="smaller sizes, a minute or two")
    sizes.add_argument("--smoke", action="store_true",
                       help="tiny sizes, seconds: does every group run? (verdicts mean nothing)")
    parser.add_argument("--only", help=f"comma-separated groups: {', '.join(GROUPS)}")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument("--profile", choices=GROUPS, help="cProfile one group, print the top")
    parser.add_argument("--timeout", type=float, default=480.0, help="seconds per group")
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child", help=argparse.SUPPRESS)  # comma-separated groups
    parser.add_argument("--size", choices=SIZES, help=argparse.SUPPRESS)  # the child's
    args = parser.parse_args(argv)
    size = args.size or ("smoke" if args.smoke else "quick" if args.quick else "full")
    if args.child:
        return child_main(args.child.split(","), size, args.work)
    groups = GROUPS
    if args.only:
        groups = tuple(name.strip() for name in args.only.split(","))
        unknown = [name for name in groups if name not in GROUPS]
        if unknown:
            parser.error(f"--only: unknown group {unknown[0]!r}; known: {', '.join(GROUPS)}")
    with tempfile.TemporaryDirectory(prefix="truva-bench-") as tmp:
        work = Path(tmp)
        if args.profile:
            return profile_main(args.profile, size, work)
        print(f"truva-console bench ({size}): {machine_line()}", flush=True)
        header = (f"{'measure':44} {'unit':>8} {'figure':>10} {'baseline':>10} {'ratio':>8} "
                  f"{'floor':>8} {'goal':>8}  result")
        print(header)
        print("-" * len(header), flush=True)
        results: list[dict] = []
        failed = 0
        started = time.perf_counter()
        for group, figures, problem, seconds in group_results(groups, size, work, args.timeout):
            for row in (r for r in ROWS if r.group == group):
                measured = figures.get(row.key)
                if measured is None:
                    verdict, cells = "FAIL", ("-", "-", "-")
                    note = problem or "no figure"
                else:
                    value = measured[row.judged]
                    ok = row.passes(value, row.floor)
                    verdict = "PASS" if ok else "FAIL"
                    if ok and not row.passes(value, row.goal):
                        verdict = "PASS (short of goal)"
                    marks = {"figure": "*" if row.judged == "figure" else "",
                             "ratio": "*" if row.judged == "ratio" else ""}
                    cells = (_number(measured["figure"]) + marks["figure"],
                             _number(measured["baseline"]),
                             _number(measured["ratio"]) + marks["ratio"])
                    note = measured["note"]
                failed += verdict == "FAIL"
                print(f"{row.title:44} {row.unit:>8} {cells[0]:>10} {cells[1]:>10} "
                      f"{cells[2]:>8} {row.limit_text(row.floor):>8} "
                      f"{row.limit_text(row.goal):>8}  {verdict}", flush=True)
                print(f"{'':44}   {note} [{group}: {seconds:.0f} s]", flush=True)
                results.append({"key": row.key, "title": row.title, "verdict": verdict,
                                "floor": row.floor, "goal": row.goal, "judged": row.judged,
                                "problem": problem, **(measured or {})})  # fmt: skip
        total = time.perf_counter() - started
        print(f"{len(results) - failed} of {len(results)} rows meet their floor "
              f"({total:.0f} s; * marks the value judged)")
    if args.json:
        args.json.write_text(json.dumps({"mode": size, "machine": machine_line(),
                                         "rows": results}, indent=2) + "\n")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
