"""`truva-console demo`: serve the demo tools and LLM, record the demo plans, write them out."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.cli.common import print_exit_notice, store_path
from console.demo.ports import DEFAULT_BASE_PORT, TOOL_NAMES
from console.exits import EXIT_BAD_INPUT, EXIT_CANCELLED, EXIT_OK, fail
from console.words import counted

if TYPE_CHECKING:
    from console.demo.runner import DemoEndpoints

_LAST_PORT_OFFSET = len(TOOL_NAMES)


def add_parser(subparsers: Any) -> None:
    """Register `demo serve|record|plans|rerecord` on an argparse subparsers object."""
    parser = subparsers.add_parser(
        "demo",
        help="bundled demo tools, demo LLM and demo plans (offline, no API key)",
        description="Demo tools and a rule-based demo LLM on 127.0.0.1, and plans that show "
        "each routing rule (docs/demo.md).",
    )
    parser.set_defaults(handler=_usage(parser))
    actions = parser.add_subparsers(title="demo commands", metavar="ACTION")

    serve = actions.add_parser(
        "serve", help="run the demo tools and demo LLM until Ctrl-C",
        description="Serve the demo tools and the demo LLM on 127.0.0.1 and print their URLs.",
    )  # fmt: skip
    _add_base_port(serve, default=DEFAULT_BASE_PORT, allow_zero=True)
    serve.add_argument(
        "--plans-dir",
        type=Path,
        metavar="DIR",
        help="also write the demo plans, with these servers' URLs, into DIR",
    )
    serve.add_argument(
        "--fast", action="store_true", help="write the plans with millisecond backoff waits"
    )
    serve.set_defaults(handler=run, demo_action="serve")

    record = actions.add_parser(
        "record", help="run every demo plan and record it in the store",
        description="Start the demo services, run every demo plan through the executor and "
        "record the executions in the debug store.",
    )  # fmt: skip
    record.add_argument(
        "--db",
        default=argparse.SUPPRESS,
        help="debug store file (default: $TRUVA_DB or ./.truva/debug.duckdb)",
    )
    record.add_argument(
        "--slow",
        action="store_true",
        help="use the executor's default backoff waits instead of milliseconds",
    )
    record.set_defaults(handler=run, demo_action="record")

    plans = actions.add_parser(
        "plans", help="write the demo plans with the URLs `demo serve` uses",
        description="Write every demo plan as DIR/<name>.json, pointing at the demo services "
        "of `truva-console demo serve --base-port N`, ready for `truva-console run`.",
    )  # fmt: skip
    plans.add_argument("dir", type=Path, metavar="DIR", help="directory to write the plans into")
    _add_base_port(plans, default=DEFAULT_BASE_PORT, allow_zero=False)
    plans.add_argument(
        "--fast",
        action="store_true",
        help="millisecond backoff waits instead of the executor's defaults",
    )
    plans.set_defaults(handler=run, demo_action="plans")

    rerecord = actions.add_parser(
        "rerecord", help="regenerate sample_traces/ from the demo plans",
        description="Record every demo plan and write one event log per execution.",
    )  # fmt: skip
    rerecord.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="directory to write (default: sample_traces/ of this checkout)",
    )
    rerecord.set_defaults(handler=run, demo_action="rerecord")


def _add_base_port(parser: argparse.ArgumentParser, *, default: int, allow_zero: bool) -> None:
    zero = "; 0 picks free ports" if allow_zero else ""
    parser.add_argument(
        "--base-port", type=int, default=default, metavar="N",
        help=f"tools on N..N+{_LAST_PORT_OFFSET - 1} ({', '.join(TOOL_NAMES)}), the LLM on "
        f"N+{_LAST_PORT_OFFSET} (default {default}{zero})",
    )  # fmt: skip


def _usage(parser: argparse.ArgumentParser) -> Any:
    def show(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT

    return show


def _check_base_port(base_port: int, *, allow_zero: bool) -> str | None:
    if allow_zero and base_port == 0:
        return None
    if not 1 <= base_port <= 65535 - _LAST_PORT_OFFSET:
        lowest = 0 if allow_zero else 1
        return (f"--base-port: expected a port from {lowest} to {65535 - _LAST_PORT_OFFSET}, "
                f"got {base_port}")  # fmt: skip
    return None


def run(args: argparse.Namespace) -> int:
    """Run one demo action; 0 on success, 2 with one line on stderr for bad input."""
    action = args.demo_action
    if action == "serve":
        return _serve(args)
    if action == "record":
        return _record(args)
    if action == "plans":
        return _plans(args)
    from console.demo.rerecord import main as rerecord_main

    return rerecord_main(["--out", str(args.out)] if args.out else [])


def write_plans(directory: Path, endpoints: DemoEndpoints, *, fast: bool) -> list[Path]:
    """Write every demo plan as `directory/<name>.json`; returns the paths in plan order."""
    from console.demo.runner import demo_plans

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, plan in demo_plans(endpoints, fast=fast).items():
        path = directory / f"{name}.json"
        path.write_text(json.dumps(plan, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    return written


def _serve(args: argparse.Namespace) -> int:
    from console.demo.runner import start_demo_services

    problem = _check_base_port(args.base_port, allow_zero=True)
    if problem:
        return fail(problem)
    try:
        services = start_demo_services(base_port=args.base_port)
    except OSError as error:
        return fail(f"{error.strerror or error}; try another --base-port, or 0 for free ports")
    with services:
        print("truva demo services on 127.0.0.1 (Ctrl-C to stop):")
        for name, url in services.tools_base_urls.items():
            print(f"  {name:<9} {url}")
        print(f"  {'llm':<9} {services.llm_base_url}  (rule-based demo LLM)")
        if args.plans_dir is not None:
            try:
                paths = write_plans(args.plans_dir, services.endpoints, fast=args.fast)
            except OSError as error:
                return fail(f"{args.plans_dir}: cannot write the demo plans: {error}")
            print(f"demo plans written to {args.plans_dir}; run one with:")
            print(f"  truva-console run {paths[0]}")
        sys.stdout.flush()
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print("stopped")
    return EXIT_OK


def _record(args: argparse.Namespace) -> int:
    from console.demo.runner import DEMO_PLANS, DemoCancelled, record_demo
    from console.session import recording
    from store.errors import StoreError

    db_path = store_path(args)
    cancelled = False
    try:
        with recording(db_path) as session:
            try:
                outcomes = record_demo(session.recorder, fast=not args.slow, handle_signals=True)
            except DemoCancelled as stopped:  # Ctrl-C or SIGTERM: the plan that ran cancelled
                outcomes, cancelled = stopped.outcomes, True
            session.close_store()
            # Shown before the telemetry export finishes, which may wait on a slow collector.
            print(f"recorded {counted(len(outcomes), 'demo execution')} into {db_path}:")
            for plan, outcome in zip(DEMO_PLANS, outcomes, strict=False):
                rules = ", ".join(f"{s.id} {s.final_rule or s.status}" for s in outcome.steps)
                print(f"  {outcome.execution_id}  {outcome.status:<9} {plan.name}: {rules}")
            print_exit_notice(session.exit_notice)
            sys.stdout.flush()
    except StoreError as error:
        return fail(str(error))
    if cancelled:
        print(f"truva-console: cancelled; {len(DEMO_PLANS) - len(outcomes)} demo plan(s) not "
              "started", file=sys.stderr)
        return EXIT_CANCELLED
    return EXIT_OK


def _plans(args: argparse.Namespace) -> int:
    from console.demo.runner import DEMO_PLANS, DemoEndpoints

    problem = _check_base_port(args.base_port, allow_zero=False)
    if problem:
        return fail(problem)
    endpoints = DemoEndpoints.for_base_port(args.base_port)
    try:
        paths = write_plans(args.dir, endpoints, fast=args.fast)
    except OSError as error:
        return fail(f"{args.dir}: cannot write the demo plans: {error}")
    for plan, path in zip(DEMO_PLANS, paths, strict=True):
        print(f"{path}  {plan.summary}")
    return EXIT_OK
