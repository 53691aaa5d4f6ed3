"""`make bench-peer`: a local Arize Phoenix ingesting the spans of our LLM-call row, beside us.

Usage: .venv/bin/python bench/bench_peer.py [--quick] [--calls N] [--url PHOENIX_URL]

Phoenix lives in its own venv (`.venv-phoenix`, the one tests/functional/test_phoenix.py uses);
when it is missing this creates it (`pip install arize-phoenix==20.26.1` from the configured
index) and, if that fails, prints why and exits 0 (a skip, not a failure). It then starts
`phoenix serve` on free loopback ports in a temporary working directory and measures, side by
side on the same executions (bench/measures.py `llm_executions`: 10 LLM calls of 20 KB
prompts per execution, plus their execution, step and tool spans):

- ours: LLM calls stored per second through `StoreRecorder` until `close()` (the llm_ingest
  row of `make bench`);
- Phoenix: LLM calls per second from the first OTLP/HTTP protobuf request until Phoenix's
  GraphQL `recordCount` shows every span stored. The spans are built (`SpanPublisher.spans`,
  content capture on, as `truva-console publish` sends them) and encoded before the clock
  starts, so only Phoenix's receiving and storing is timed.

`--url` uses a Phoenix already running there instead (its spans so far are not counted).
Prints both figures and ours ÷ Phoenix against the issue's goal (≥ 10×). Not run in CI.
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
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

STARTUP_S = 420.0  # it builds its SQLite schema first; slow on a loaded machine
STORED_TIMEOUT_S = 600.0
BATCH_SPANS = 512  # spans per request, as `publish` sends them

from tests.support.phoenix import (  # noqa: E402 (after the path set-up above)
    PHOENIX_VERSION,
    VENV,
    phoenix_bin,
    start_phoenix,
    stop_phoenix,
)


def skip(reason: str) -> int:
    print(f"bench-peer: skipped: {reason}")
    return 0


def phoenix_binary() -> tuple[Path | None, str]:
    """The `phoenix` executable, installing it in its own venv when missing; else why not."""
    binary = phoenix_bin()
    if binary is not None:
        return binary, ""
    if os.environ.get("PHOENIX_SERVE_BIN"):
        return None, f"PHOENIX_SERVE_BIN={os.environ['PHOENIX_SERVE_BIN']} is not a file"
    print(f"bench-peer: installing arize-phoenix=={PHOENIX_VERSION} into {VENV} …", flush=True)
    steps = ([sys.executable, "-m", "venv", str(VENV)],
             [str(VENV / "bin" / "pip"), "install", "-q", f"arize-phoenix=={PHOENIX_VERSION}"])
    for command in steps:
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            what = " ".join([Path(command[0]).name, *(w for w in command[1:] if w[:1] != "-")])
            return None, f"cannot install Arize Phoenix ({what}: {last[:160]})"
    binary = phoenix_bin()
    return (binary, "") if binary is not None else (None, f"no phoenix in {VENV} after installing")


def encoded_batches(executions: list[list], base_url: str) -> tuple[list[bytes], int]:
    """The executions' spans as OTLP protobuf request bodies of BATCH_SPANS; and the count."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from executor.telemetry import span_publisher_from_env

    publisher = span_publisher_from_env({
        "OTEL_EXPORTER_OTLP_ENDPOINT": base_url, "OTEL_METRICS_EXPORTER": "none",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"})  # fmt: skip
    assert publisher is not None
    try:
        spans = [span for events in executions for span in publisher.spans(events)]
    finally:
        publisher.shutdown()
    bodies = [encode_spans(spans[i : i + BATCH_SPANS]).SerializeToString()
              for i in range(0, len(spans), BATCH_SPANS)]  # fmt: skip
    return bodies, len(spans)


def stored_spans(client, base_url: str) -> int:
    """Spans Phoenix has stored, over all projects (GraphQL `recordCount`)."""
    query = "{ projects { edges { node { recordCount } } } }"
    response = client.post(f"{base_url}/graphql", json={"query": query}, timeout=30)
    response.raise_for_status()
    edges = response.json()["data"]["projects"]["edges"]
    return sum(edge["node"]["recordCount"] for edge in edges)


def phoenix_seconds(base_url: str, bodies: list[bytes], span_count: int) -> float:
    """Seconds from the first request until Phoenix has stored `span_count` spans."""
    import httpx

    headers = {"content-type": "application/x-protobuf"}
    with httpx.Client() as client:
        target = span_count + stored_spans(client, base_url)  # a reused Phoenix keeps its spans
        started = time.perf_counter()
        for body in bodies:
            response = client.post(f"{base_url}/v1/traces", content=body, headers=headers,
                                   timeout=120)  # fmt: skip
            response.raise_for_status()
        deadline = time.monotonic() + STORED_TIMEOUT_S
        while (stored := stored_spans(client, base_url)) < target:
            if time.monotonic() > deadline:
                raise RuntimeError(f"Phoenix stored {stored} of {target} spans")
        return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="400 calls instead of 2,000")
    parser.add_argument("--calls", type=int, help="LLM calls (a multiple of 10)")
    parser.add_argument("--url", help="a running Phoenix to use, e.g. http://127.0.0.1:6006")
    args = parser.parse_args(argv)
    calls = args.calls or (400 if args.quick else 2_000)
    binary, why = (None, "") if args.url else phoenix_binary()
    if binary is None and not args.url:
        return skip(why)
    from bench.measures import llm_executions, record_all

    executions = llm_executions(calls // 10, 10, 20_000)
    with tempfile.TemporaryDirectory(prefix="truva-bench-peer-") as tmp:
        work = Path(tmp)
        ours_s = record_all(work / "llm.duckdb", executions)
        process = None
        if args.url:
            base_url = args.url.rstrip("/")
        else:
            try:
                process, base_url = start_phoenix(binary, work / "phoenix", STARTUP_S)
            except RuntimeError as error:
                return skip(str(error))
        try:
            bodies, span_count = encoded_batches(executions, base_url)
            theirs_s = phoenix_seconds(base_url, bodies, span_count)
        finally:
            if process is not None:
                stop_phoenix(process)
    ours, theirs = calls / ours_s, calls / theirs_s
    megabytes = sum(len(body) for body in bodies) / 1e6
    print(json.dumps({"calls": calls, "spans": span_count, "otlp_mb": round(megabytes, 1),
                      "ours_calls_per_s": round(ours, 1),
                      "phoenix_calls_per_s": round(theirs, 1)}))  # fmt: skip
    verdict = "meets" if ours >= 10 * theirs else "short of"
    print(f"LLM calls (20 KB) stored/s: truva-console {ours:,.1f} vs Arize Phoenix "
          f"{PHOENIX_VERSION} {theirs:,.1f} (OTLP/HTTP, {span_count:,} spans, "
          f"{megabytes:.0f} MB): ×{ours / theirs:.1f}, {verdict} the goal of ≥ 10×")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
