"""The measures of issue 12's goals table, each run side by side with its baseline.

Every public `measure_*` function takes `(quick, work)` and returns {row name: Figure}; `quick`
is a `Size`, false at the issue's full sizes. run_all.py calls each in a child process of its own
so one measure's memory or threads never colour the next. Everything is loopback and temporary
files under `work`.
"""

from __future__ import annotations

import asyncio
import enum
import json
import os
import statistics
import subprocess
import sys
import time
import zipfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_MB = 1_000_000


class Size(enum.IntEnum):
    """How big a run is: the issue's sizes, `--quick`'s, or `--smoke`'s (tiny: does every group
    still run and print its rows?). False at full size, so `x if quick else y` reads as before."""

    FULL = 0
    QUICK = 1
    SMOKE = 2

    def pick(self, full: int, quick: int, smoke: int) -> int:
        """The size of this run among the three."""
        return (full, quick, smoke)[self]


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured row: the product's figure, the baseline's, and their ratio."""

    figure: float
    baseline: float
    ratio: float
    note: str = ""


# ---------------------------------------------------------------------------------------------
# Loopback tool and plans
# ---------------------------------------------------------------------------------------------


def _echo_server():
    from console.demo.server import DemoHTTPServer, DemoRequest, DemoResponse

    def ok(request: DemoRequest) -> DemoResponse:
        n = request.json.get("n", 0) if isinstance(request.json, dict) else 0
        return DemoResponse(200, {"success": True, "data": {"n": n}})

    return DemoHTTPServer("bench", ok)


def plan_document(base_url: str, size: int, *, chain: bool = False,
                  concurrency: int = 1) -> dict[str, Any]:
    """A plan of `size` one-dispatch steps; a chain binds each step to the previous one."""
    steps = []
    for i in range(size):
        step: dict[str, Any] = {"id": f"step-{i}", "tool": "bench", "capability": "echo",
                                "parameters": {"city": "Paris", "n": i}}
        if chain and i:
            step["depends_on"] = [f"step-{i - 1}"]
            step["parameters"]["previous"] = f"{{{{step-{i - 1}.data.n}}}}"
        steps.append(step)
    return {
        "query": "bench",
        "tools": {"bench": {"base_url": base_url}},
        "capabilities": {"bench.echo": {"path": "/capabilities/echo"}},
        "steps": steps,
        "config": {"max_concurrency": concurrency},
    }  # fmt: skip


async def _bare_loop(url: str, size: int, concurrency: int) -> None:
    """POST `size` times with `concurrency` workers sharing one httpx client."""
    import httpx

    counter = iter(range(size))
    limits = httpx.Limits(max_connections=max(concurrency, 10))
    async with httpx.AsyncClient(limits=limits) as client:

        async def worker() -> None:
            for i in counter:
                response = await client.post(url, json={"city": "Paris", "n": i})
                response.raise_for_status()

        await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _run_executor(document: dict[str, Any], recorder: Any) -> None:
    from executor.plan import parse_plan
    from executor.runtime import PlanExecutor

    outcome = await PlanExecutor(parse_plan(document), recorder=recorder, env={}).run()
    assert outcome.status == "succeeded", outcome.status


def _seconds(work: Callable[[], Awaitable[None]]) -> float:
    started = time.perf_counter()
    asyncio.run(work())
    return time.perf_counter() - started


def _executor_with_store(document: dict[str, Any], db: Path) -> float:
    """Seconds from the recorder's creation to its close (every row queryable)."""
    from store.recorder import StoreRecorder

    started = time.perf_counter()
    recorder = StoreRecorder(db)
    asyncio.run(_run_executor(document, recorder))
    recorder.close()
    return time.perf_counter() - started


def measure_executor(quick: Size, work: Path) -> dict[str, Figure]:
    """Executor + DuckDB store against a bare httpx loop, concurrency 1 and 8 (best of rounds)."""
    steps, rounds = quick.pick(10_000, 1_000, 20), quick.pick(2, 2, 1)
    rows: dict[str, Figure] = {}
    with _echo_server() as server:
        url = f"{server.base_url}/capabilities/echo"
        asyncio.run(_bare_loop(url, 200, 1))  # warm-up: imports, first connections
        for concurrency in (1, 8):
            document = plan_document(server.base_url, steps, concurrency=concurrency)
            bare, product = [], []
            for round_number in range(rounds):
                bare.append(_seconds(lambda c=concurrency: _bare_loop(url, steps, c)))
                db = work / f"executor-c{concurrency}-{round_number}.duckdb"
                product.append(_executor_with_store(document, db))
            bare_ms, product_ms = min(bare) / steps * 1e3, min(product) / steps * 1e3
            rows[f"executor_c{concurrency}"] = Figure(
                product_ms, bare_ms, bare_ms / product_ms,
                f"{steps:,} steps, ms/step, best of {rounds}")  # fmt: skip
    return rows


def _wall_and_cpu(work: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    """Wall seconds and process CPU seconds (every thread: the loop and the loopback tool)."""
    started, cpu = time.perf_counter(), time.process_time()
    asyncio.run(work())
    return time.perf_counter() - started, time.process_time() - cpu


def measure_plan_scale(quick: Size, work: Path) -> dict[str, Figure]:
    """Per-step cost at the large size ÷ at 100 steps, and chain ÷ independent (no recorder).

    The 100-step figure is the mean of as many 100-step runs as the large run has steps, half
    before it and half after (A-B-A): both sides send the same requests over the same span of
    time, so a burst of other work on the machine weighs on each alike. (It was the best of ten
    100-step runs against one large run: a minimum against a mean, 1.3 s against 18 s.) The
    note gives the process CPU per step of both sides too, which the load colours less.
    """
    large = quick.pick(10_000, 2_000, 200)
    half = large // 200
    with _echo_server() as server:
        base = server.base_url
        asyncio.run(_run_executor(plan_document(base, 200, chain=True), None))  # warm-up
        small = plan_document(base, 100)
        runs = [_wall_and_cpu(lambda: _run_executor(small, None)) for _ in range(half)]
        independent = plan_document(base, large)
        chain = plan_document(base, large, chain=True)
        independent_s, independent_cpu = _wall_and_cpu(lambda: _run_executor(independent, None))
        runs += [_wall_and_cpu(lambda: _run_executor(small, None)) for _ in range(half)]
        chain_ms = _seconds(lambda: _run_executor(chain, None)) / large * 1e3
    steps = 100 * len(runs)
    small_ms = sum(wall for wall, _ in runs) / steps * 1e3
    small_cpu_ms = sum(cpu for _, cpu in runs) / steps * 1e3
    best_ms = min(wall for wall, _ in runs[:10]) / 100 * 1e3
    independent_ms, independent_cpu_ms = independent_s / large * 1e3, independent_cpu / large * 1e3
    return {
        "per_step": Figure(independent_ms, small_ms, independent_ms / small_ms,
                           f"ms/step at {large:,} vs 100 ({len(runs)} runs around it, mean; "
                           f"best of the first 10: {best_ms:.3f}); CPU ms/step "
                           f"{independent_cpu_ms:.3f} vs {small_cpu_ms:.3f} = "
                           f"{independent_cpu_ms / small_cpu_ms:.3f}; no recorder"),
        "chain": Figure(chain_ms, independent_ms, chain_ms / independent_ms,
                        f"ms/step, {large:,}-step chain vs independent, no recorder"),
    }  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Peak memory of child processes
# ---------------------------------------------------------------------------------------------

# VmHWM is this process's own high-water mark; ru_maxrss would include what the parent had
# at fork, which Linux carries over exec.
_PEAK_CHILD = """
import resource, sys
from console.entry import main
rc = main(sys.argv[1:])
hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:'))
print('PEAK_KIB', int(hwm.split()[1]), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
      file=sys.stderr)
raise SystemExit(rc)
"""


def child_peak_mb(args: list[str], *, cwd: Path) -> tuple[float, int, str]:
    """Run `truva-console ARGS` in a child; its peak RSS (MB), exit code and first stderr line."""
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_CHILD, *args], capture_output=True, text=True, cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    lines = result.stderr.splitlines()
    peak = next((int(line.split()[1]) for line in lines if line.startswith("PEAK_KIB")), -1)
    first = next((line for line in lines if not line.startswith("PEAK_KIB")), "")
    return peak * 1024 / _MB, result.returncode, first[:120]


def measure_run_memory(quick: Size, work: Path) -> dict[str, Figure]:
    """Peak RSS of `truva-console run` on a long plan with the store, against `--no-store`."""
    steps = quick.pick(10_000, 2_000, 20)
    with _echo_server() as server:
        plan = work / "long-plan.json"
        plan.write_text(json.dumps(plan_document(server.base_url, steps)))
        with_store, rc, message = child_peak_mb(
            ["run", str(plan), "--db", str(work / "run.duckdb")], cwd=work)
        assert rc == 0, f"run exited {rc}: {message}"
        without, rc, message = child_peak_mb(["run", str(plan), "--no-store"], cwd=work)
        assert rc == 0, f"run --no-store exited {rc}: {message}"
    return {"run_rss": Figure(with_store, without, with_store / without,
                              f"MB, {steps:,} steps; baseline --no-store")}


# ---------------------------------------------------------------------------------------------
# Synthetic executions for the recorder and the bundles
# ---------------------------------------------------------------------------------------------


_WORDS = ("the", "tool", "call", "failed", "with", "status", "retry", "after", "city",
          "Paris", "amount", "currency", "contact", "invoice", "schema", "field")
_PROSE = " ".join(_WORDS[(i * 2654435761) % len(_WORDS)] + str(i % 97) for i in range(40_000))


def filler(size: int, seed: int) -> str:
    """`size` characters of JSON-safe text that compresses like prose, distinct per `seed`."""
    head = f"text {seed} "
    offset = (seed * 7919) % 1000
    return (head + _PROSE[offset:offset + size])[:size]


def llm_executions(executions: int, calls_each: int, prompt_bytes: int) -> list[list[Any]]:
    """Executions of one step whose attempt had `calls_each` LLM calls of ~`prompt_bytes`."""
    from executor.events import LLMCall
    from tests.support.events_factory import ExecutionScript, decision

    step = {"id": "step-1", "tool": "crm", "capability": "create_contact",
            "parameters": {"name": "Ada"}, "depends_on": []}  # fmt: skip
    plan = {"query": "bench llm", "tools": {"crm": {"base_url": "http://127.0.0.1:8102"}},
            "steps": [step]}  # fmt: skip
    result = []
    for e in range(executions):
        script = ExecutionScript(f"llm-{e:06d}")
        script.start(plan)
        script.step_started(step)
        script.attempt(step, 1, parameters=step["parameters"], status=400,
                       response_body=b'{"success":false}',
                       decided=decision("stop_terminal", "terminal.auth_or_method", "bench"))
        for c in range(calls_each):
            content = filler(prompt_bytes, e * calls_each + c)
            messages = ({"role": "system", "content": "You analyze failed tool calls."},
                        {"role": "user", "content": content})
            request_body = json.dumps({"model": "gpt-test", "messages": messages}).encode()
            script.events.append(LLMCall(
                execution_id=script.execution_id, step_id="step-1", n=1,
                call_id=f"{script.execution_id}-llm-{c}", site="error_analysis",
                at=script.tick(), latency_ms=10.0, base_url="http://127.0.0.1:8200/v1",
                model="gpt-test", temperature=0.0, max_tokens=256, messages=messages,
                request_body=request_body, response_status=200,
                response_body=b'{"choices":[{"message":{"content":"{}"}}]}', raw_text="{}",
                parsed={"should_retry": False}, parse_error=None, error=None,
                prompt_tokens=prompt_bytes // 4, completion_tokens=2,
                total_tokens=prompt_bytes // 4 + 2))  # fmt: skip
        script.step_finished("step-1", "failed", dispatch_count=1, attempts=1,
                             final_action="stop_terminal",
                             final_rule_id="terminal.auth_or_method")
        script.finish("failed", llm_calls=calls_each)
        result.append(script.events)
    return result


def attempt_executions(executions: int, steps_each: int, body_bytes: int) -> list[list[Any]]:
    """Executions of `steps_each` one-attempt steps whose responses carry ~`body_bytes`."""
    from tests.support.events_factory import ExecutionScript, decision

    result = []
    for e in range(executions):
        steps = [{"id": f"step-{s}", "tool": "crm", "capability": "lookup",
                  "parameters": {"n": s}, "depends_on": []} for s in range(steps_each)]
        plan = {"query": "bench attempts",
                "tools": {"crm": {"base_url": "http://127.0.0.1:8102"}}, "steps": steps}
        script = ExecutionScript(f"att-{e:06d}")
        script.start(plan)
        for s, step in enumerate(steps):
            body = ('{"success":true,"data":{"text":"'
                    + filler(body_bytes, e * steps_each + s) + '"}}').encode()
            script.step_started(step)
            script.attempt(step, 1, parameters=step["parameters"], status=200,
                           response_body=body,
                           decided=decision("success", "success.2xx", "HTTP 200 is a success"))
            script.step_finished(step["id"], "succeeded", dispatch_count=1, attempts=1,
                                 final_action="success", final_rule_id="success.2xx")
        script.finish("succeeded")
        result.append(script.events)  # fmt: skip
    return result


def record_all(db: Path, executions: list[list[Any]]) -> float:
    """Seconds to record every event through StoreRecorder until close() (rows queryable)."""
    from store.recorder import StoreRecorder

    started = time.perf_counter()
    recorder = StoreRecorder(db)
    for events in executions:
        for event in events:
            recorder.record(event)
    recorder.close()
    return time.perf_counter() - started


def raw_arrow_insert(source_db: Path, target_db: Path, table: str) -> tuple[float, int]:
    """Seconds to insert `table`'s rows of `source_db`, as one Arrow table, into a new store."""
    import duckdb

    from store.connection import session, store_paths

    with duckdb.connect(str(source_db), read_only=True) as source:
        arrow = source.sql(f"SELECT * FROM {table}").to_arrow_table()
    # The timer covers creating the store (the same migrations), as `record_all`'s covers
    # `StoreRecorder` creating its store: both sides make a new store and fill it.
    started = time.perf_counter()
    with session(store_paths(target_db), create=True):
        pass
    conn = duckdb.connect(str(target_db))
    try:
        conn.register("incoming", arrow)
        conn.execute(f"INSERT INTO {table} SELECT * FROM incoming")
        conn.execute("CHECKPOINT")
        seconds = time.perf_counter() - started
    finally:
        conn.close()
    return seconds, arrow.num_rows


def _ingest_figure(work: Path, name: str, table: str, executions: list[list[Any]], rows: int,
                   unit: str) -> Figure:  # fmt: skip
    """`rows` rows of `table` recorded per second, against a raw Arrow insert of the same rows."""
    from store.connection import session, store_paths

    db = work / f"{name}.duckdb"
    # Neither timer pays the process's first DuckDB open (up to 0.7 s, once per process).
    with session(store_paths(work / f"{name}-warm.duckdb"), create=True):
        pass
    seconds = record_all(db, executions)
    raw_seconds, raw_rows = raw_arrow_insert(db, work / f"{name}-raw.duckdb", table)
    assert raw_rows == rows, (raw_rows, rows)
    product, baseline = rows / seconds, rows / raw_seconds
    return Figure(product, baseline, product / baseline, unit)


def measure_llm_ingest(quick: Size, work: Path) -> dict[str, Figure]:
    """LLM calls with 20 KB prompts stored per second, against a raw Arrow insert of the rows."""
    calls = quick.pick(2_000, 400, 20)
    executions = llm_executions(calls // 10, 10, 20_000)
    return {"llm_ingest": _ingest_figure(work, "llm", "llm_calls", executions, calls,
                                         f"calls/s, {calls:,} calls of 20 KB")}  # fmt: skip


def measure_attempt_ingest(quick: Size, work: Path) -> dict[str, Figure]:
    """Attempt rows per second through the recorder, against a raw Arrow insert of the rows."""
    attempts = quick.pick(10_000, 2_000, 100)
    executions = attempt_executions(attempts // 100, 100, 20_000)
    return {"attempt_ingest": _ingest_figure(
        work, "attempts", "attempts", executions, attempts,
        f"rows/s, {attempts:,} attempts with 20 KB bodies")}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Bundles
# ---------------------------------------------------------------------------------------------


def bundle_source(work: Path, quick: Size) -> tuple[Path, int]:
    """A store of LLM calls with 20 KB prompts (80 MB in full); returns it and its text bytes."""
    calls = quick.pick(4_000, 500, 20)
    db = work / "bundle-source.duckdb"
    executions = llm_executions(calls // 20, 20, 20_000)
    record_all(db, executions)
    # Each prompt counted once: the request bytes hold it (the `messages` copy is not counted).
    text_bytes = sum(len(event.request_body) + len(event.response_body)
                     for events in executions for event in events if event.kind == "llm_call")
    return db, text_bytes


def _raw_zip_seconds(db: Path, work: Path) -> float:
    """Seconds to deflate the same prompts and bodies into one zip member and read it back."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as conn:
        blobs = [row[0] + row[1] for row in conn.execute(
            "SELECT request_body, response_body FROM llm_calls"
        ).fetchall()]  # fmt: skip
    target = work / "raw.zip"
    started = time.perf_counter()
    with (zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive,
          archive.open("rows.bin", "w") as member):
        for blob in blobs:
            member.write(blob)
    with zipfile.ZipFile(target) as archive, archive.open("rows.bin") as member:
        while member.read(1 << 20):
            pass
    return time.perf_counter() - started


def measure_bundle(quick: Size, work: Path) -> dict[str, Figure]:
    """Bundle export (redaction on) + import throughput, and the import's peak RSS."""
    from store.bundle import export_bundle, import_bundle

    db, text_bytes = bundle_source(work, quick)
    bundle = work / "bench-bundle.zip"
    started = time.perf_counter()
    export_bundle(db, bundle, None, redact=True)
    exported = time.perf_counter() - started
    started = time.perf_counter()
    import_bundle(work / "imported.duckdb", bundle)
    imported = time.perf_counter() - started
    product = text_bytes / _MB / (exported + imported)
    baseline = text_bytes / _MB / _raw_zip_seconds(db, work)
    peak, rc, message = child_peak_mb(["import", str(bundle), "--db",
                                       str(work / "imported-child.duckdb")], cwd=work)
    assert rc == 0, f"import exited {rc}: {message}"
    floor_peak, rc, message = child_peak_mb(["ls", "--db", str(work / "imported.duckdb")],
                                            cwd=work)
    return {
        "bundle_mbps": Figure(product, baseline, product / baseline,
                              f"{text_bytes / _MB:.0f} MB of text: export {exported:.1f} s + "
                              f"import {imported:.1f} s; baseline raw zip deflate+inflate"),
        "bundle_rss": Figure(peak, floor_peak, peak / floor_peak,
                             f"MB importing {bundle.stat().st_size / _MB:.0f} MB zipped; "
                             "baseline `ls` of the same store"),
    }  # fmt: skip


# ---------------------------------------------------------------------------------------------
# A big store, the console and text search
# ---------------------------------------------------------------------------------------------


def big_store(work: Path, quick: Size) -> tuple[Path, int]:
    """The bench_store.py store: 100k executions / 1M attempts (10k / 100k when quick, 100 / 1k
    for the smoke)."""
    from bench.bench_store import build

    executions = quick.pick(100_000, 10_000, 100)
    db = work / f"big-{executions}.duckdb"
    if not (db.parent / f"{db.name}.built").exists():  # a failed build leaves no marker
        build(db, executions)
        (db.parent / f"{db.name}.built").touch()
    return db, executions


def _median_ms(run: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        samples.append((time.perf_counter() - started) * 1e3)
    return statistics.median(samples)


async def _launch_to_painted_ms(db: Path) -> float:
    from console.tui.app import TruvaConsoleApp
    from console.tui.screens.executions import ExecutionsScreen

    started = time.perf_counter()
    app = TruvaConsoleApp(db, live_refresh=False)
    app.animation_level = "none"
    async with app.run_test(size=(140, 40)) as pilot:
        await _until_shown(app, pilot, ExecutionsScreen, "page", 400)  # and painted
        elapsed = (time.perf_counter() - started) * 1e3
    return elapsed


def measure_console_list(quick: Size, work: Path) -> dict[str, Figure]:
    """Console launch → list painted on the big store, against the first-page query alone."""
    from store.queries import open_store

    db, executions = big_store(work, quick)
    painted = [asyncio.run(_launch_to_painted_ms(db)) for _ in range(quick.pick(3, 3, 1))]
    query = _median_ms(lambda: open_store(db).list_executions(), quick.pick(5, 5, 1))
    figure = statistics.median(painted)
    return {"console_list": Figure(figure / 1e3, query / 1e3, figure / query,
                                   f"s, {executions:,} executions (app start, imports "
                                   "excluded); baseline open_store + list_executions")}


def measure_text_search(quick: Size, work: Path) -> dict[str, Figure]:
    """`ExecutionFilter(text=...)` over the big store, against a bare DuckDB scan of the columns."""
    import duckdb

    from store.queries import ExecutionFilter, open_store

    db, executions = big_store(work, quick)
    store = open_store(db)
    needle = f"failure {executions * 5 + 7} "
    figure = _median_ms(lambda: store.list_executions(ExecutionFilter(text=needle)), 3)
    raw_sql = """
        SELECT count(DISTINCT execution_id) FROM (
            SELECT execution_id FROM attempts
            WHERE contains(CAST(request_body AS VARCHAR), $t)
               OR contains(CAST(response_body AS VARCHAR), $t)
            UNION ALL
            SELECT execution_id FROM llm_calls
            WHERE contains(CAST(request_body AS VARCHAR), $t) OR contains(raw_text, $t))
    """

    def raw() -> None:
        with duckdb.connect(str(db), read_only=True) as conn:
            conn.execute(raw_sql, {"t": needle}).fetchall()

    baseline = _median_ms(raw, 3)
    return {"text_search": Figure(figure, baseline, figure / baseline,
                                  f"ms, {executions * 10:,} attempts; baseline bare "
                                  "contains() scan, no lower/decode")}


def execution_with_many_attempts(db: Path) -> str:
    """Record one execution of 1,000 attempts (200 steps × 5) and 200 LLM calls of 50 KB."""
    from executor.events import LLMCall
    from tests.support.events_factory import ExecutionScript, decision

    steps = [{"id": f"step-{s}", "tool": "crm", "capability": "lookup",
              "parameters": {"n": s}, "depends_on": []} for s in range(200)]  # fmt: skip
    script = ExecutionScript("big-execution-0001")
    script.start({"query": "one big execution",
                  "tools": {"crm": {"base_url": "http://127.0.0.1:8102"}}, "steps": steps})
    for s, step in enumerate(steps):
        script.step_started(step)
        for n in range(1, 6):
            last = n == 5
            script.attempt(step, n, parameters=step["parameters"], status=200 if last else 503,
                           response_body=b'{"success":%s,"n":%d}' % (b"true" if last else
                                                                     b"false", n),
                           decided=decision("success", "success.2xx", "ok") if last else
                           decision("retry_same", "transient.retry_same", "503"))
            if n == 1:
                content = filler(50_000, s)
                messages = ({"role": "user", "content": content},)
                script.events.append(LLMCall(
                    execution_id=script.execution_id, step_id=step["id"], n=1,
                    call_id=f"call-{s}", site="error_analysis", at=script.tick(),
                    latency_ms=5.0, base_url="http://127.0.0.1:8200/v1", model="gpt-test",
                    temperature=0.0, max_tokens=256, messages=messages,
                    request_body=json.dumps({"messages": messages}).encode(),
                    response_status=200, response_body=b'{"choices":[]}', raw_text="{}",
                    parsed={"should_retry": True}, parse_error=None, error=None,
                    prompt_tokens=12_500, completion_tokens=2, total_tokens=12_502))
        script.step_finished(step["id"], "succeeded", dispatch_count=5, attempts=5,
                             final_action="success", final_rule_id="success.2xx")
    script.finish("succeeded", llm_calls=200)  # fmt: skip
    record_all(db, [script.events])
    return script.execution_id


async def _open_execution_ms(db: Path, execution_id: str) -> float:
    from console.tui.app import TruvaConsoleApp

    app = TruvaConsoleApp(db, live_refresh=False)
    app.animation_level = "none"
    async with app.run_test(size=(140, 40)) as pilot:
        await _list_painted(app, pilot)
        started = time.perf_counter()
        await _open_and_wait(app, pilot, execution_id)
        return (time.perf_counter() - started) * 1e3


async def _list_painted(app: Any, pilot: Any) -> None:
    """Wait until the executions list has its first page, painted."""
    from console.tui.screens.executions import ExecutionsScreen

    await _until_shown(app, pilot, ExecutionsScreen, "page", 400)


async def _open_and_wait(app: Any, pilot: Any, execution_id: str) -> None:
    """Open the execution and wait until its screen has the detail, painted."""
    from console.tui.screens.execution import ExecutionScreen

    app.open_execution(execution_id)
    await _until_shown(app, pilot, ExecutionScreen, "detail", 4000)


async def _until_shown(app: Any, pilot: Any, screen_type: type, loaded: str, tries: int) -> None:
    """Pause until the app shows `screen_type` with its `loaded` attribute set (or a problem),
    then once more so that it is painted."""
    for _ in range(tries):
        screen = app.screen
        if isinstance(screen, screen_type) and (getattr(screen, loaded) or screen.problem):
            break
        await pilot.pause()
    shown = app.screen
    assert isinstance(shown, screen_type) and getattr(shown, loaded), f"{loaded} not loaded"
    await pilot.pause()


def measure_console_open(quick: Size, work: Path) -> dict[str, Figure]:
    """Open an execution of 1,000 attempts and 200 LLM calls of 50 KB, against get_execution."""
    from store.queries import open_store

    db = work / "one-big-execution.duckdb"
    execution_id = execution_with_many_attempts(db)
    repeat = quick.pick(3, 3, 1)
    opened = statistics.median(asyncio.run(_open_execution_ms(db, execution_id))
                               for _ in range(repeat))  # fmt: skip
    store = open_store(db)
    query = _median_ms(lambda: store.get_execution(execution_id), repeat)
    return {"console_open": Figure(opened / 1e3, query / 1e3, opened / query,
                                   "s, screen shown; baseline Store.get_execution")}


def execution_with_big_prompt(db: Path, prompt_bytes: int, *, line_chars: int) -> str:
    """Record one execution whose only attempt has one LLM call with a `prompt_bytes` prompt.

    `line_chars` > 0 breaks the prompt into lines of that length (a prompt of prose or logs);
    0 keeps it one line (a minified JSON document pasted into the prompt).
    """
    from executor.events import LLMCall
    from tests.support.events_factory import ExecutionScript, decision

    step = {"id": "step-1", "tool": "crm", "capability": "lookup", "parameters": {"n": 1},
            "depends_on": []}  # fmt: skip
    script = ExecutionScript(f"big-prompt-{line_chars:04d}")
    script.start({"query": "one big prompt",
                  "tools": {"crm": {"base_url": "http://127.0.0.1:8102"}}, "steps": [step]})
    script.step_started(step)
    script.attempt(step, 1, parameters=step["parameters"], status=503,
                   response_body=b'{"success":false}',
                   decided=decision("stop_terminal", "terminal.auth_or_method", "bench"))
    text = "".join(filler(100_000, seed) for seed in range(prompt_bytes // 100_000 + 1))
    text = text[:prompt_bytes]
    if line_chars:
        text = "\n".join(text[i : i + line_chars] for i in range(0, len(text), line_chars))
    messages = ({"role": "user", "content": text},)
    script.events.append(LLMCall(
        execution_id=script.execution_id, step_id="step-1", n=1, call_id="call-big",
        site="error_analysis", at=script.tick(), latency_ms=5.0,
        base_url="http://127.0.0.1:8200/v1", model="gpt-test", temperature=0.0,
        max_tokens=256, messages=messages,
        request_body=json.dumps({"messages": messages}).encode(), response_status=200,
        response_body=b'{"choices":[]}', raw_text="{}", parsed={"should_retry": False},
        parse_error=None, error=None, prompt_tokens=prompt_bytes // 4, completion_tokens=2,
        total_tokens=prompt_bytes // 4 + 2))
    script.step_finished("step-1", "failed", dispatch_count=1, attempts=1,
                         final_action="stop_terminal", final_rule_id="terminal.auth_or_method")
    script.finish("failed", llm_calls=1)  # fmt: skip
    record_all(db, [script.events])
    return script.execution_id


# What a reader does with a big prompt in the LLM tab, after opening the execution; "focus"
# moves the focus to the prompt's text (what a click on it does), "to-end" and "to-start" move
# to its last and first line (a drag of the scroll bar; TextArea binds no key to it).
PROMPT_KEYS = ("focus", *["pagedown"] * 10, "to-end", *["pageup"] * 5, "to-start",
               *["down"] * 10, "end", "home")  # fmt: skip
# The keys that scroll or move in the text, whose frames the row judges (loading it is not).
_SCROLL_KEYS = frozenset({"pagedown", "pageup", "to-end", "to-start", "down", "end", "home"})


class LongestCallback:
    """The longest asyncio callback while active: the longest the app could not paint.

    Textual runs every message handler and every repaint as steps of asyncio tasks on one
    loop; nothing else is drawn while one step runs, so the longest step in an action is the
    longest frame the user waits for in it.
    """

    def __init__(self) -> None:
        self.longest_s = 0.0
        self._original = asyncio.events.Handle._run

    def __enter__(self) -> LongestCallback:
        original, meter = self._original, self

        def timed(handle: asyncio.events.Handle) -> None:
            started = time.perf_counter()
            try:
                original(handle)
            finally:
                meter.longest_s = max(meter.longest_s, time.perf_counter() - started)

        asyncio.events.Handle._run = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc_info: object) -> None:
        asyncio.events.Handle._run = self._original  # type: ignore[method-assign]

    def take_ms(self) -> float:
        """The longest step since the last take, in ms."""
        longest, self.longest_s = self.longest_s, 0.0
        return longest * 1e3


async def _prompt_frames_ms(db: Path, execution_id: str, min_chars: int,
                            keys: tuple[str, ...] = PROMPT_KEYS) -> dict[str, float]:  # fmt: skip
    """The longest frame (ms) of opening the execution and of each of `keys`."""
    from textual.widgets import TextArea

    from console.tui.app import TruvaConsoleApp

    app = TruvaConsoleApp(db, live_refresh=False)
    app.animation_level = "none"
    frames: dict[str, float] = {}
    async with app.run_test(size=(140, 40)) as pilot:
        await _list_painted(app, pilot)
        with LongestCallback() as meter:
            meter.take_ms()
            await _open_and_wait(app, pilot, execution_id)
            frames["open"] = meter.take_ms()
            await pilot.press("4")  # the LLM tab, built when first shown; it reads the texts
            await pilot.pause()
            frames["tab"] = meter.take_ms()
            area = app.screen.query_one("#llm-text", TextArea)
            for _ in range(2000):  # the prompt is read and prepared in threads: until shown
                if len(area.text) > min_chars:
                    break
                await pilot.pause(0.005)
            frames["read"] = meter.take_ms()
            for index, key in enumerate(keys):
                if key == "focus":
                    area.focus()
                elif key in ("to-end", "to-start"):
                    area.move_cursor((area.document.line_count - 1 if key == "to-end" else 0, 0))
                else:
                    await pilot.press(key)
                await pilot.pause()
                await pilot.pause()  # the repaint the key asked for
                frames[f"{index:02d} {key}"] = meter.take_ms()
        assert app.focused is area, f"the LLM text is not focused ({app.focused!r})"
        assert area.cursor_location[0] > 0, "the keys did not move in the text"
        assert len(area.text) > min_chars, (len(area.text), min_chars)
    return frames


def measure_tui_prompt(quick: Size, work: Path) -> dict[str, Figure]:
    """The longest frame while scrolling a 5 MB prompt in the TUI, against a 50 KB prompt."""
    size = quick.pick(5_000_000, 1_000_000, 100_000)
    # The smoke presses each key once, on one shape of prompt: every path, a quarter the frames.
    keys = tuple(dict.fromkeys(PROMPT_KEYS)) if quick is Size.SMOKE else PROMPT_KEYS
    shapes = (120,) if quick is Size.SMOKE else (120, 0)
    worst: dict[str, tuple[float, str]] = {}
    loading: list[str] = []
    for label, prompt_bytes in (("big", size), ("small", 50_000)):
        for line_chars in shapes:
            db = work / f"prompt-{label}-{line_chars}.duckdb"
            execution_id = execution_with_big_prompt(db, prompt_bytes, line_chars=line_chars)
            frames = asyncio.run(_prompt_frames_ms(db, execution_id, prompt_bytes, keys))
            shape = f"lines of {line_chars}" if line_chars else "one line"
            scrolls = {k: v for k, v in frames.items() if k.split()[-1] in _SCROLL_KEYS}
            key = max(scrolls, key=scrolls.__getitem__)
            median = statistics.median(scrolls.values())
            if scrolls[key] > worst.get(label, (-1.0, ""))[0]:
                worst[label] = (scrolls[key], f"{key.split()[-1]} ({shape}; median {median:.0f})")
            if label == "big":
                loading.append(f"{shape}: open {frames['open']:.0f}, tab {frames['tab']:.0f}, "
                               f"read {frames['read']:.0f}")
    (big, big_at), (small, _) = worst["big"], worst["small"]
    return {"tui_prompt": Figure(big, small, big / small,
                                 f"ms, longest frame scrolling {size / _MB:.0f} MB: {big_at}; "
                                 f"baseline 50 KB; loading it (ms): {'; '.join(loading)}")}


MEASURES: dict[str, Callable[[Size, Path], dict[str, Figure]]] = {
    "executor": measure_executor,
    "plan_scale": measure_plan_scale,
    "run_memory": measure_run_memory,
    "llm_ingest": measure_llm_ingest,
    "attempt_ingest": measure_attempt_ingest,
    "bundle": measure_bundle,
    "console_list": measure_console_list,
    "console_open": measure_console_open,
    "text_search": measure_text_search,
    "tui_prompt": measure_tui_prompt,
}
