"""Time span building and OTLP publishing of recorded executions (what `publish` does).

Usage: .venv/bin/python bench/bench_telemetry.py [--executions 200]
Each execution is `tests.support.events_factory.realistic_execution` (5 steps, 16 spans with an
LLM call). Prints the median per-execution cost of rebuilding spans (content capture off/on) and
spans per second delivered to a loopback receiver for each OTLP protocol (batches of ~512 spans,
as `publish` sends them; the receiver's decoding is included).
"""

from __future__ import annotations

import argparse
import statistics
import time

from executor.telemetry import build_spans_from_events, span_publisher_from_env
from tests.support.events_factory import realistic_execution
from tests.support.otlp_grpc_receiver import OTLPGrpcReceiver
from tests.support.otlp_receiver import OTLPReceiver


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--executions", type=int, default=200)
    count = parser.parse_args().executions
    executions = [realistic_execution(f"bench-{i}") for i in range(count)]
    spans_each = len(build_spans_from_events(executions[0]))
    for capture in (False, True):
        times = []
        for events in executions:
            started = time.perf_counter()
            build_spans_from_events(events, capture_content=capture)
            times.append(time.perf_counter() - started)
        print(f"build spans, content {'on ' if capture else 'off'}: "
              f"{statistics.median(times) * 1000:.2f} ms per execution ({spans_each} spans)")
    for protocol in ("http/protobuf", "http/json", "grpc"):
        receiver = OTLPGrpcReceiver() if protocol == "grpc" else OTLPReceiver()
        with receiver:
            publisher = span_publisher_from_env(
                {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                 "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}
            )
            assert publisher is not None
            started = time.perf_counter()
            sent = 0
            batch: list = []
            for events in executions:  # as `publish` does: whole executions, ~512 spans a request
                batch.extend(publisher.spans(events))
                if len(batch) >= 512:
                    assert publisher.send(batch)
                    sent, batch = sent + len(batch), []
            assert publisher.send(batch)
            sent += len(batch)
            elapsed = time.perf_counter() - started
            publisher.shutdown()
            received = len(receiver.span_names())
        print(f"publish {protocol:<13}: {sent / elapsed:,.0f} spans/s "
              f"({count} executions, {sent} spans sent, {received} received, {elapsed:.2f} s)")


if __name__ == "__main__":
    main()
