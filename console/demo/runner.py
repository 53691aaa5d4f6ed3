"""Start the demo services, fill the bundled demo plans with their URLs, and record the plans.

The bundled plans (`console/demo/plans/*.json`) name their tools and LLM by placeholder URLs,
`demo://<tool>` and `demo://llm`; `demo_plans()` replaces them with the live loopback URLs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any, Self

from console.demo.llm import start_demo_llm
from console.demo.ports import TOOL_NAMES
from console.demo.server import LOOPBACK, DemoHTTPServer
from console.demo.tools import DemoTool, SlowReports, build_tools
from executor.events import Event, ListRecorder, Recorder
from executor.plan import Plan, parse_plan
from executor.runtime import ExecutionOutcome, PlanExecutor

PLACEHOLDER_RE = re.compile(r"demo://([a-z_]+)")
LLM_PLACEHOLDER = "llm"
# Fast timing for recordings: backoff waits of milliseconds. A plan's own config wins, which is
# how scenario-b keeps the real one-second Retry-After.
FAST_CONFIG = {"initial_delay_ms": 10, "max_delay_ms": 40}


@dataclass(frozen=True, slots=True)
class DemoPlan:
    """One bundled demo plan and what it shows.

    With `cancel_in_flight`, the runner cancels the run (as Ctrl-C would) when the plan's
    `stocks.history` request reaches the tool, which holds it until then.
    """

    name: str
    summary: str
    cancel_in_flight: bool = False


DEMO_PLANS: tuple[DemoPlan, ...] = (
    DemoPlan("scenario-a-invalid-city",
             "400 INVALID_CITY retryable:true; the analyzer corrects PARIS to PAR (seed A)"),
    DemoPlan("scenario-b-rate-limit",
             "429 with Retry-After: 1; the same payload is resent after one second (seed B)"),
    DemoPlan("scenario-c-expired-key", "401 from an expired API key; stops at once (seed C)"),
    DemoPlan("scenario-d-misclassified-503",
             "503 for a bad location; resent unchanged until the attempts run out (seed D)"),
    DemoPlan("flower-mound",
             "404 LOCATION_NOT_FOUND; the analyzer rewrites 'Flower Mound, TX'"),
    DemoPlan("tesla-layer4",
             "amount 0 rejected; layer 4 computes 100 × 468.285 from the quote step"),
    DemoPlan("parallel-partial",
             "six steps: corrections, transient retries, a refusal and a skipped dependent"),
    DemoPlan("unsafe-charge", "502 from an unsafe payment capability; never resent"),
    DemoPlan("guard-rejection", "a value outside the schema enum; rejected before any request"),
    DemoPlan("hitl-protected",
             "400 INVALID_CITY, but a human approved city_code; the correction is refused"),
    DemoPlan("orchestrator-timeout",
             "504 from a delegated trip-planner agent; one dispatch, never resent"),
    DemoPlan("no-correction",
             "404 for 'Atlantis'; layers 3 and 4 cannot fix it, so it is not resent"),
    DemoPlan("circuit-open",
             "ten 503s from a weather outage open the circuit; the next step is not sent"),
    DemoPlan("cancelled-report",
             "the run is cancelled while a slow report is in flight; its dependent is skipped",
             cancel_in_flight=True),
)  # fmt: skip
DEMO_PLAN_NAMES = tuple(plan.name for plan in DEMO_PLANS)


@dataclass(frozen=True, slots=True)
class DemoEndpoints:
    """Where the demo tools and the demo LLM listen."""

    tools_base_urls: dict[str, str]
    llm_base_url: str

    @classmethod
    def for_base_port(cls, base_port: int) -> DemoEndpoints:
        """The URLs `start_demo_services(base_port=...)` uses: tools in TOOL_NAMES order, then
        the LLM."""
        tools = {name: f"http://{LOOPBACK}:{base_port + i}" for i, name in enumerate(TOOL_NAMES)}
        return cls(tools, f"http://{LOOPBACK}:{base_port + len(TOOL_NAMES)}/v1")


class DemoServices:
    """The running demo tool servers and demo LLM; close them with `close()` or `with`."""

    def __init__(
        self, servers: Mapping[str, DemoHTTPServer], tools: Mapping[str, DemoTool],
        llm: DemoHTTPServer, reports: SlowReports | None = None,
    ) -> None:  # fmt: skip
        self.servers = dict(servers)
        self.tools = dict(tools)
        self.llm = llm
        self.reports = reports if reports is not None else SlowReports()

    @property
    def tools_base_urls(self) -> dict[str, str]:
        """Tool name → `http://127.0.0.1:PORT`."""
        return {name: server.base_url for name, server in self.servers.items()}

    @property
    def llm_base_url(self) -> str:
        """The demo LLM's OpenAI `base_url`, `http://127.0.0.1:PORT/v1`."""
        return f"{self.llm.base_url}/v1"

    @property
    def endpoints(self) -> DemoEndpoints:
        """The URLs as one record."""
        return DemoEndpoints(self.tools_base_urls, self.llm_base_url)

    def close(self) -> None:
        """Stop every server; they stop side by side, so this takes one poll interval."""
        self.reports.close()
        closing = [
            threading.Thread(target=server.close, name=f"close-demo-{server.name}")
            for server in (*self.servers.values(), self.llm)
        ]
        for thread in closing:
            thread.start()
        for thread in closing:
            thread.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def start_demo_services(*, base_port: int = 0) -> DemoServices:
    """Start the demo tools and the demo LLM on 127.0.0.1.

    With `base_port` 0 every server takes a free port; otherwise the tools listen on
    `base_port`, `base_port + 1`, … in TOOL_NAMES order and the LLM after them.
    """
    reports = SlowReports()
    tools = build_tools(reports)
    started: list[DemoHTTPServer] = []
    try:
        servers = {}
        for index, name in enumerate(TOOL_NAMES):
            port = base_port + index if base_port else 0
            servers[name] = DemoHTTPServer(name, tools[name].handle, port=port)
            started.append(servers[name])
        llm = start_demo_llm(base_port + len(TOOL_NAMES) if base_port else 0)
    except BaseException:
        for server in started:
            server.close()
        raise
    return DemoServices(servers, tools, llm, reports)


def bundled_plan(name: str) -> dict[str, Any]:
    """The bundled plan `name` as written, placeholders and all."""
    if name not in DEMO_PLAN_NAMES:
        raise KeyError(f"no demo plan named {name!r} (known: {', '.join(DEMO_PLAN_NAMES)})")
    text = resources.files("console.demo").joinpath("plans", f"{name}.json").read_text("utf-8")
    return json.loads(text)


def fill_placeholders(plan: Any, endpoints: DemoEndpoints) -> Any:
    """A copy of `plan` with every `demo://<tool>` and `demo://llm` string replaced by its URL."""
    urls = {**endpoints.tools_base_urls, LLM_PLACEHOLDER: endpoints.llm_base_url}

    def filled(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: filled(item) for key, item in value.items()}
        if isinstance(value, list):
            return [filled(item) for item in value]
        if isinstance(value, str):
            match = PLACEHOLDER_RE.fullmatch(value)
            if match:
                if match.group(1) not in urls:
                    raise ValueError(
                        f"demo plan placeholder {value!r} names no demo service "
                        f"(known: {', '.join(urls)})"
                    )
                return urls[match.group(1)]
        return value

    return filled(plan)


def with_fast_timing(plan: Mapping[str, Any]) -> dict[str, Any]:
    """`plan` with millisecond backoffs (FAST_CONFIG) under its own config values."""
    return {**plan, "config": {**FAST_CONFIG, **plan.get("config", {})}}


def demo_plans(
    services: DemoServices | DemoEndpoints, *, fast: bool = False
) -> dict[str, dict[str, Any]]:
    """Every demo plan, in DEMO_PLANS order, with the live URLs of `services` filled in."""
    endpoints = services.endpoints if isinstance(services, DemoServices) else services
    plans = {}
    for name in DEMO_PLAN_NAMES:
        plan = fill_placeholders(bundled_plan(name), endpoints)
        plans[name] = with_fast_timing(plan) if fast else plan
    return plans


def parse_demo_plan(name: str, plan: Mapping[str, Any]) -> Plan:
    """The demo plan as a `Plan` whose source is `demo:<name>`."""
    source = f"demo:{name}"
    return replace(parse_plan(plan, source=source), source_path=source)


async def run_demo_plans(
    services: DemoServices,
    recorder_for: Callable[[str], Recorder],
    *,
    fast: bool = True,
    names: tuple[str, ...] = DEMO_PLAN_NAMES,
    handle_signals: bool = False,
) -> dict[str, ExecutionOutcome]:
    """Run the named demo plans one after another, each reporting to `recorder_for(name)`.

    The environment is not read: no TRUVAG3_* or OPENAI_* setting changes what a demo shows.
    With `handle_signals` (the CLI's `demo record`, in the main thread), SIGINT and SIGTERM
    cancel the plan that runs, as they cancel `run`, and no other starts: DemoCancelled carries
    the outcomes of the plans run. The loop's handlers of those signals are replaced meanwhile.
    """
    plans = demo_plans(services, fast=fast)
    cancelling = {plan.name for plan in DEMO_PLANS if plan.cancel_in_flight}
    outcomes = {}
    running: list[PlanExecutor] = []
    stopped = asyncio.Event()

    def stop() -> None:
        stopped.set()
        for executor in running:
            executor.cancel()

    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM) if handle_signals else ()
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        for sig in signals:
            loop.add_signal_handler(sig, stop)
    try:
        for name in names:
            if stopped.is_set():
                break
            executor = PlanExecutor(
                parse_demo_plan(name, plans[name]), recorder=recorder_for(name), env={}
            )
            running[:] = [executor]
            if name in cancelling:
                outcomes[name] = await _run_cancelled_in_flight(executor, services.reports)
            else:
                outcomes[name] = await executor.run()
    finally:
        for sig in signals:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
    if stopped.is_set():
        raise DemoCancelled(list(outcomes.values()))
    return outcomes


class DemoCancelled(Exception):
    """A signal cancelled `run_demo_plans`; `outcomes` are those of the plans run, in order."""

    def __init__(self, outcomes: list[ExecutionOutcome]) -> None:
        super().__init__(f"cancelled after {len(outcomes)} demo plan(s)")
        self.outcomes = outcomes


async def _run_cancelled_in_flight(
    executor: PlanExecutor, reports: SlowReports
) -> ExecutionOutcome:
    """Run `executor`, cancelling it when its held report request arrives at the tool."""
    loop = asyncio.get_running_loop()
    reports.on_arrival(executor.execution_id, lambda: loop.call_soon_threadsafe(executor.cancel))
    try:
        return await executor.run()
    finally:
        reports.release(executor.execution_id)


async def arecord_demo(
    recorder_or_db_path: Recorder | str | os.PathLike[str],
    *,
    fast: bool = True,
    handle_signals: bool = False,
) -> list[ExecutionOutcome]:
    """`record_demo` for callers already inside an event loop."""
    if isinstance(recorder_or_db_path, str | os.PathLike):
        from console.session import recording

        with recording(recorder_or_db_path, telemetry=False) as session:
            return await arecord_demo(
                session.recorder, fast=fast, handle_signals=handle_signals
            )
    recorder = recorder_or_db_path
    with start_demo_services() as services:
        outcomes = await run_demo_plans(
            services, lambda _name: recorder, fast=fast, handle_signals=handle_signals
        )
    return list(outcomes.values())


def record_demo(
    recorder_or_db_path: Recorder | str | os.PathLike[str],
    *,
    fast: bool = True,
    handle_signals: bool = False,
) -> list[ExecutionOutcome]:
    """Run every demo plan against freshly started demo services and record it.

    Give a recorder, or a store path (recorded through `StoreRecorder`, closed at the end).
    `fast` shortens backoff waits to milliseconds (scenario-b still honours its one-second
    Retry-After); without it the executor's default timing applies. Outcomes in DEMO_PLANS order.
    `handle_signals`: see `run_demo_plans` (DemoCancelled).
    """
    return asyncio.run(
        arecord_demo(recorder_or_db_path, fast=fast, handle_signals=handle_signals)
    )


def record_demo_events(*, fast: bool = True) -> dict[str, list[Event]]:
    """Run every demo plan and return each one's events, by plan name (for sample traces)."""
    recorders = {name: ListRecorder() for name in DEMO_PLAN_NAMES}

    async def record() -> None:
        with start_demo_services() as services:
            await run_demo_plans(services, recorders.__getitem__, fast=fast)

    asyncio.run(record())
    return {name: recorder.events for name, recorder in recorders.items()}
