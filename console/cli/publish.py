"""`truva-console publish`: send recorded executions from the store to the OTLP endpoint.

The scale-out path: record on a laptop or CI runner, publish to the team's Phoenix, Jaeger,
Tempo or collector. Spans are rebuilt from the store rows (as trace bundles rebuild them) with
ids derived from the recorded ids, so publishing twice, after a live export, or from an
imported bundle sends the same trace and span ids, and the backend keeps one copy.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from console.cli.common import add_command, store_path
from console.exits import EXIT_OK, fail
from console.words import counted

EXIT_NOT_DELIVERED = 1
BATCH_SPANS = 512  # spans per export request at most (whole executions; the SDK's batch size)
_DURATION = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def add_parser(subparsers: Any) -> None:
    """Register `publish` on an argparse subparsers object."""
    parser = add_command(
        subparsers, "publish", run,
        help="send recorded executions to the OTLP endpoint",
        description="Send recorded executions from the store to the OTLP endpoint the "
        "OTEL_EXPORTER_OTLP_* variables name, as traces (docs/telemetry.md). Span ids derive "
        "from the recorded ids: publishing again never duplicates spans.",
    )  # fmt: skip
    parser.add_argument(
        "execution_ids", nargs="*", metavar="EXECUTION", help="execution ids, or unique prefixes"
    )
    parser.add_argument(
        "--all", dest="publish_all", action="store_true", help="every finished execution"
    )
    parser.add_argument(
        "--since",
        metavar="WHEN",
        help="with --all: only executions started at or after WHEN, an ISO 8601 date or time "
        "(UTC unless it has an offset) or an age such as 30m, 12h, 7d",
    )


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """WHEN as a naive UTC datetime (compared in UTC); ValueError names the value."""
    value = text.strip()
    match = _DURATION.match(value.lower())
    if match:
        amount, unit = int(match.group(1)), match.group(2)
        moment = (now or datetime.now(UTC)) - timedelta(**{_UNITS[unit]: amount})
        return moment.astimezone(UTC).replace(tzinfo=None)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"--since {text!r}: expected an ISO 8601 date or time (2026-12-01, "
            "2026-12-01T09:30:00Z) or an age (30m, 12h, 7d)"
        ) from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def _rows_by_execution(
    rows: dict[str, list[dict[str, Any]]], execution_ids: list[str]
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Each execution's own rows of every table, grouped in one pass over the rows."""
    grouped: dict[str, dict[str, list[dict[str, Any]]]] = {
        execution_id: {table: [] for table in rows} for execution_id in execution_ids
    }
    for table, table_rows in rows.items():
        for row in table_rows:
            own = grouped.get(row.get("execution_id"))
            if own is not None:
                own[table].append(row)
    return grouped


def run(args: argparse.Namespace) -> int:
    """Publish; 0 when every span was delivered, 1 when the endpoint did not take a request,
    2 with one line on stderr for bad input (no endpoint, unknown execution, bad --since)."""
    from executor.telemetry import span_publisher_from_env, telemetry_settings_from_env
    from store.bundle import events_from_rows, read_execution_rows
    from store.errors import StoreError
    from store.queries import open_store

    if bool(args.execution_ids) == bool(args.publish_all):
        return fail("publish: give execution ids or --all (one of the two)")
    if args.since is not None and not args.publish_all:
        return fail("publish: --since goes with --all")
    try:
        since = parse_since(args.since) if args.since is not None else None
    except ValueError as error:
        return fail(f"publish: {error}")
    publisher = span_publisher_from_env()
    # The exporter's own log lines ("Failed to export span batch code: 404…", with the
    # endpoint) would come beside the one line below that says what was and was not delivered.
    logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
    if publisher is None:
        switched_off_by = telemetry_settings_from_env().traces.switched_off_by
        if switched_off_by is not None:
            return fail(f"publish: {switched_off_by} switches traces off, so there is nothing "
                        "to publish to; unset it, see docs/telemetry.md")  # fmt: skip
        return fail(
            "publish: no OTLP traces endpoint is configured; set OTEL_EXPORTER_OTLP_ENDPOINT "
            "(or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), see docs/telemetry.md"
        )
    try:
        store = open_store(store_path(args))
        with store.session() as conn:
            chosen, skipped = _choose(store, conn, args.execution_ids, args.publish_all, since)
            rows = read_execution_rows(conn, chosen)
    except StoreError as error:
        publisher.shutdown()
        return fail(error)
    by_execution = _rows_by_execution(rows, chosen)
    spans_of = ((execution_id, publisher.spans(events_from_rows(by_execution[execution_id])))
                for execution_id in chosen)  # fmt: skip
    delivered: list[str] = []
    delivered_spans = 0
    refused: list[str] = []
    try:
        for batch_ids, batch in export_batches(spans_of, BATCH_SPANS):
            if not publisher.send(batch):
                refused = batch_ids
                break
            delivered.extend(batch_ids)
            delivered_spans += len(batch)
    finally:
        publisher.shutdown()
    if delivered or not refused:
        print(
            f"published {counted(delivered_spans, 'span')} of "
            f"{counted(len(delivered), 'execution')} to "
            f"{publisher.shown_endpoint} ({publisher.protocol})"
        )
        for execution_id in delivered:
            print(f"  {execution_id}")
    if skipped:
        print(
            f"truva-console: note: skipped {counted(len(skipped), 'execution')} still running: "
            f"{', '.join(skipped)}",
            file=sys.stderr,
        )
    if refused:
        print(
            f"truva-console: publish: {publisher.shown_endpoint} did not accept the spans of "
            f"{counted(len(refused), 'execution')} ({', '.join(refused)}), sent in one request; "
            f"{len(delivered)} of {counted(len(chosen), 'execution')} were delivered, by the "
            f"requests before it, and the other {len(chosen) - len(delivered)} not "
            "(publishing again sends the same span ids)",
            file=sys.stderr,
        )
        return EXIT_NOT_DELIVERED
    return EXIT_OK


def export_batches(
    spans_of: Iterable[tuple[str, list[Any]]], limit: int
) -> Iterator[tuple[list[str], list[Any]]]:
    """(execution ids, their spans) per export request: whole executions, in order, at most
    `limit` spans, except that an execution of more spans than `limit` is a request of its own."""
    batch_ids: list[str] = []
    batch: list[Any] = []
    for execution_id, spans in spans_of:
        if batch_ids and len(batch) + len(spans) > limit:
            yield batch_ids, batch
            batch_ids, batch = [], []
        batch_ids.append(execution_id)
        batch.extend(spans)
    if batch_ids:
        yield batch_ids, batch


def _choose(
    store: Any, conn: Any, requested: list[str], every: bool, since: datetime | None
) -> tuple[list[str], list[str]]:
    """(execution ids to publish, running ones skipped by --all)."""
    from store.errors import StoreError

    if every:
        return store.executions_in_order(conn, since=since)

    def still_running(execution_id: str) -> StoreError:
        return StoreError(
            f"{store.path}: execution {execution_id} is still running; publish it once it "
            "has finished"
        )

    return store.resolve_finished(conn, requested, still_running), []
