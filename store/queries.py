"""Headless queries over the debug store: open, list with filters, one execution, summary counts.

Every call opens the file for a moment (waiting briefly if another process has it), first
ingests waiting spool segments and marks executions of dead writers `interrupted`, runs its SQL
and closes, so a recorder in another process is never locked out for long. Times are returned
as epoch seconds (float, UTC); durations in milliseconds.
"""

from __future__ import annotations

import base64
import json
import os
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import duckdb

from executor.contract import response_warnings
from store.connection import (
    DEFAULT_LOCK_TIMEOUT_S,
    StorePaths,
    check_store_file,
    session,
    store_is_writable,
    store_paths,
)
from store.errors import ExecutionNotFoundError, StepNotFoundError
from store.ingest import maintain

EXECUTION_STATUSES = ("running", "succeeded", "partial", "failed", "cancelled", "interrupted")
STEP_STATUSES = ("running", "succeeded", "failed", "rejected", "skipped", "interrupted")
ACTIONS = (
    "reject_predispatch",
    "success",
    "stop_refused",
    "stop_terminal",
    "stop_single_dispatch",
    "retry_same",
    "stop_budget",
    "stop_protected",
    "retry_corrected",
    "stop_no_correction",
    "stop_cancelled",
    "stop_unsafe_resend",
    "stop_circuit_open",
)


@dataclass(frozen=True, slots=True)
class ExecutionFilter:
    """Which executions to list; unset fields do not filter.

    `tool`, `capability`, `action`, `rule_id` and `http_status` must all hold for one attempt
    (or, for tool and capability alone, one step). `since` (inclusive) and `until` (exclusive)
    bound `started_at` in epoch seconds. `text` is searched, case-insensitively, in request and
    response bodies, LLM prompt messages and raw LLM answers. `capability` may be `tool.capability`.
    """

    status: str | None = None
    tool: str | None = None
    capability: str | None = None
    action: str | None = None
    rule_id: str | None = None
    http_status: int | None = None
    since: float | None = None
    until: float | None = None
    text: str | None = None
    warning: str | None = None


@dataclass(frozen=True, slots=True)
class ExecutionRow:
    """One execution with its counts, as listed."""

    execution_id: str
    status: str
    started_at: float | None
    finished_at: float | None
    duration_ms: float | None
    query: str | None
    plan_path: str | None
    tool_version: str | None
    stop_reason: str | None
    incomplete_steps: tuple[str, ...]
    steps_planned: int
    steps_total: int
    steps_succeeded: int
    steps_failed: int
    steps_rejected: int
    steps_skipped: int
    steps_unfinished: int
    attempts: int
    dispatches: int
    llm_calls: int
    llm_total_tokens: int
    last_failing_rule: str | None
    writer_pid: int | None
    writer_host: str | None
    rerun_of: str | None = None
    contract_warnings: int = 0


@dataclass(frozen=True, slots=True)
class Page:
    """One page of executions, newest first, and how many match in total."""

    executions: tuple[ExecutionRow, ...]
    total: int
    limit: int
    offset: int


@dataclass(frozen=True, slots=True)
class LLMCallRecord:
    """One LLM request and its raw answer, complete."""

    call_id: str
    step_id: str | None
    n: int | None
    site: str | None
    model: str | None
    base_url: str | None
    temperature: float | None
    max_tokens: int | None
    messages: Any
    request_body: bytes | None
    request_size: int | None
    response_status: int | None
    response_body: bytes | None
    response_size: int | None
    raw_text: str | None
    parsed: Any
    parse_error: str | None
    error: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    latency_ms: float | None
    called_at: float | None
    text_note: str | None = None

    @property
    def text_recorded(self) -> bool:
        """False when the prompt and response text were not recorded (`text_note` says why)."""
        return self.text_note is None

    @property
    def status_text(self) -> str:
        """`HTTP 200`, or `no HTTP response` when the endpoint never answered."""
        if self.response_status is None:
            return "no HTTP response"
        return f"HTTP {self.response_status}"

    @property
    def tokens_text(self) -> str:
        """`P prompt + C completion = T tokens`, or `tokens unknown`."""
        if self.total_tokens is None:
            return "tokens unknown"
        return (
            f"{self.prompt_tokens} prompt + {self.completion_tokens} completion = "
            f"{self.total_tokens} tokens"
        )


@dataclass(frozen=True, slots=True)
class EventRecord:
    """A coercion, backoff phase, notice or circuit change."""

    step_id: str | None
    n: int | None
    seq: int
    occurred_at: float | None
    kind: str
    name: str | None
    message: str | None
    attrs: Any


@dataclass(frozen=True, slots=True)
class BackoffRecord:
    """The wait after an attempt: planned vs actual, and what set the delay."""

    planned_at: float | None
    planned_ms: float | None
    delay_source: str | None
    actual_ms: float | None
    outcome: str | None


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt: what was sent, what came back, and the decision with its inputs."""

    step_id: str
    n: int
    attempt_number: int | None
    dispatched: bool | None
    parameters: Any
    correction_layer: str | None
    method: str | None
    url: str | None
    request_headers: Any
    request_body: bytes | None
    request_size: int | None
    status: int | None
    response_headers: Any
    response_body: bytes | None
    response_size: int | None
    transport_error: str | None
    transport_error_message: str | None
    elapsed_ms: float | None
    retry_policy: str | None
    action: str | None
    rule_id: str | None
    reason: str | None
    decision: Any
    decision_layer: str | None
    corrected_parameters: Any
    delay_ms: float | None
    delay_source: str | None
    started_at: float | None
    responded_at: float | None
    decided_at: float | None
    recovery: str | None = None
    impact: str | None = None
    llm_calls: tuple[LLMCallRecord, ...] = ()
    events: tuple[EventRecord, ...] = ()
    backoff: BackoffRecord | None = None


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step with its attempts in order."""

    step_id: str
    tool: str | None
    capability: str | None
    url: str | None
    depends_on: tuple[str, ...]
    parameters: Any
    protected_keys: Any
    orchestrator: bool | None
    side_effects: str | None
    status: str | None
    dispatch_count: int | None
    attempts_count: int | None
    validation_retries: int | None
    semantic_retries: int | None
    final_action: str | None
    final_rule_id: str | None
    error: str | None
    result: Any
    skip_reason: str | None
    started_at: float | None
    finished_at: float | None
    attempts: tuple[AttemptRecord, ...] = ()
    events: tuple[EventRecord, ...] = ()
    llm_calls: tuple[LLMCallRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class ExecutionDetail:
    """Everything recorded about one execution.

    `events` and `llm_calls` hold what was recorded outside any step (circuit changes, say).
    """

    execution: ExecutionRow
    plan: Any
    config: Any
    config_sources: Any
    llm: Any
    steps: tuple[StepRecord, ...]
    events: tuple[EventRecord, ...]
    llm_calls: tuple[LLMCallRecord, ...] = ()

    def step(self, step_id: str) -> StepRecord:
        """The step named `step_id`; StepNotFoundError names the steps there are."""
        for step in self.steps:
            if step.step_id == step_id:
                return step
        known = ", ".join(step.step_id for step in self.steps) or "none recorded"
        raise StepNotFoundError(
            f"execution {self.execution.execution_id} has no step {step_id!r} (steps: {known})"
        )


def body_view(body: bytes | None) -> dict[str, Any] | None:
    """A JSON-able view of exact bytes: UTF-8 text when valid, else base64."""
    if body is None:
        return None
    try:
        return {"size": len(body), "encoding": "utf-8", "text": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {
            "size": len(body),
            "encoding": "base64",
            "text": base64.b64encode(body).decode("ascii"),
        }


def to_jsonable(value: Any) -> Any:
    """Records as plain JSON-able data; bytes become `body_view` dicts."""
    if is_dataclass(value) and not isinstance(value, type):
        return {item.name: to_jsonable(getattr(value, item.name)) for item in fields(value)}
    if isinstance(value, bytes):
        return body_view(value)
    if isinstance(value, dict):
        return {key: to_jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(item) for item in value]
    return value


# ---------------------------------------------------------------------------------------------
# SQL
# ---------------------------------------------------------------------------------------------


def _body_text(column: str) -> str:
    """SQL for a BLOB column as lower-case text: UTF-8 when valid, else with \\xNN escapes."""
    return f"lower(coalesce(try(decode({column})), CAST({column} AS VARCHAR)))"


_TEXT_MATCH = f"""
e.execution_id IN (
    SELECT execution_id FROM attempts
    WHERE contains({_body_text("request_body")}, $text)
        OR contains({_body_text("response_body")}, $text)
    UNION
    SELECT execution_id FROM llm_calls
    WHERE contains(lower(CAST(messages AS VARCHAR)), $text)
        OR contains(lower(coalesce(raw_text, '')), $text)
)
"""


def _filter_sql(filters: ExecutionFilter) -> tuple[str, dict[str, Any]]:
    """A WHERE condition on `executions AS e` and its named parameters."""
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if filters.status:
        clauses.append("e.status = $status")
        params["status"] = filters.status
    if filters.since is not None:
        clauses.append("e.started_at >= make_timestamp(CAST(round($since * 1000000) AS BIGINT))")
        params["since"] = float(filters.since)
    if filters.until is not None:
        clauses.append("e.started_at < make_timestamp(CAST(round($until * 1000000) AS BIGINT))")
        params["until"] = float(filters.until)
    step_conditions: list[str] = []
    if filters.tool:
        step_conditions.append("s.tool = $tool")
        params["tool"] = filters.tool
    if filters.capability:
        step_conditions.append(
            "(s.capability = $capability OR s.tool || '.' || s.capability = $capability)"
        )
        params["capability"] = filters.capability
    attempt_conditions: list[str] = []
    if filters.action:
        attempt_conditions.append("a.action = $action")
        params["action"] = filters.action
    if filters.rule_id:
        attempt_conditions.append("a.rule_id = $rule_id")
        params["rule_id"] = filters.rule_id
    if filters.http_status is not None:
        attempt_conditions.append("a.status = $http_status")
        params["http_status"] = int(filters.http_status)
    if attempt_conditions:
        join = "JOIN steps AS s USING (execution_id, step_id)" if step_conditions else ""
        clauses.append(
            f"e.execution_id IN (SELECT a.execution_id FROM attempts AS a {join} "
            f"WHERE {' AND '.join(attempt_conditions + step_conditions)})"
        )
    elif step_conditions:
        clauses.append(
            "e.execution_id IN (SELECT s.execution_id FROM steps AS s "
            f"WHERE {' AND '.join(step_conditions)})"
        )
    if filters.text:
        clauses.append(_TEXT_MATCH)
        params["text"] = filters.text.lower()
    return (" AND ".join(clauses) or "TRUE"), params


_RESPONSES = """
SELECT a.execution_id, a.status, a.response_body FROM attempts AS a
WHERE a.dispatched AND a.status > 0 AND a.response_body IS NOT NULL AND {scope}
"""


def _warning_counts(conn: duckdb.DuckDBPyConnection, execution_ids: list[str]) -> dict[str, int]:
    """How many recorded responses of each execution break the tool contract (executor.contract)."""
    if not execution_ids:
        return {}
    counts: dict[str, int] = defaultdict(int)
    cursor = conn.execute(_RESPONSES.format(scope="list_contains($ids, a.execution_id)"),
                          {"ids": execution_ids})  # fmt: skip
    while batch := cursor.fetchmany(500):
        for execution_id, status, body in batch:
            if response_warnings(status, body):
                counts[execution_id] += 1
    return dict(counts)


def _with_warning_filter(
    conn: duckdb.DuckDBPyConnection, filters: ExecutionFilter, where: str, params: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """`where` narrowed to executions with a contract warning (`any` or one code), if asked."""
    if not filters.warning:
        return where, params
    cursor = conn.execute(
        _RESPONSES.format(scope=f"a.execution_id IN (SELECT e.execution_id FROM executions AS e "
                                f"WHERE {where})"), params)  # fmt: skip
    warned: set[str] = set()
    while batch := cursor.fetchmany(500):
        for execution_id, status, body in batch:
            if execution_id not in warned and any(
                filters.warning in ("any", warning.code)
                for warning in response_warnings(status, body)
            ):
                warned.add(execution_id)
    return f"({where}) AND list_contains($warned_ids, e.execution_id)", {
        **params, "warned_ids": sorted(warned)}  # fmt: skip


# `page` is a CTE of execution ids; the counts are computed for those executions only.
_ROWS_FOR_PAGE = """
step_counts AS (
    SELECT
        execution_id,
        count(*) AS steps_total,
        count(*) FILTER (WHERE status = 'succeeded') AS steps_succeeded,
        count(*) FILTER (WHERE status = 'failed') AS steps_failed,
        count(*) FILTER (WHERE status = 'rejected') AS steps_rejected,
        count(*) FILTER (WHERE status = 'skipped') AS steps_skipped,
        count(*) FILTER (
            WHERE status IS NULL OR status NOT IN ('succeeded', 'failed', 'rejected', 'skipped')
        ) AS steps_unfinished,
        arg_max(final_rule_id, coalesce(finished_at, started_at))
            FILTER (WHERE status IN ('failed', 'rejected')) AS last_failing_rule
    FROM steps
    WHERE execution_id IN (SELECT execution_id FROM page)
    GROUP BY execution_id
),
attempt_counts AS (
    SELECT
        execution_id, count(*) AS attempts,
        count(*) FILTER (WHERE dispatched AND transport_error IS DISTINCT FROM 'connect')
            AS dispatches
    FROM attempts
    WHERE execution_id IN (SELECT execution_id FROM page)
    GROUP BY execution_id
),
llm_counts AS (
    SELECT execution_id, count(*) AS llm_calls, sum(total_tokens) AS llm_total_tokens
    FROM llm_calls
    WHERE execution_id IN (SELECT execution_id FROM page)
    GROUP BY execution_id
)
SELECT
    e.execution_id,
    e.status,
    epoch(e.started_at) AS started_at,
    epoch(e.finished_at) AS finished_at,
    (epoch(e.finished_at) - epoch(e.started_at)) * 1000 AS duration_ms,
    e.query,
    e.plan_path,
    e.tool_version,
    e.stop_reason,
    coalesce(e.incomplete_steps, []) AS incomplete_steps,
    coalesce(json_array_length(snapshot.plan, '$.steps'), 0) AS steps_planned,
    coalesce(s.steps_total, 0) AS steps_total,
    coalesce(s.steps_succeeded, 0) AS steps_succeeded,
    coalesce(s.steps_failed, 0) AS steps_failed,
    coalesce(s.steps_rejected, 0) AS steps_rejected,
    coalesce(s.steps_skipped, 0) AS steps_skipped,
    coalesce(s.steps_unfinished, 0) AS steps_unfinished,
    coalesce(a.attempts, 0) AS attempts,
    coalesce(a.dispatches, 0) AS dispatches,
    coalesce(l.llm_calls, 0) AS llm_calls,
    coalesce(l.llm_total_tokens, 0) AS llm_total_tokens,
    s.last_failing_rule,
    e.writer_pid,
    e.writer_host,
    e.rerun_of
FROM page
JOIN executions AS e USING (execution_id)
LEFT JOIN execution_snapshots AS snapshot USING (execution_id)
LEFT JOIN step_counts AS s USING (execution_id)
LEFT JOIN attempt_counts AS a USING (execution_id)
LEFT JOIN llm_counts AS l USING (execution_id)
ORDER BY e.started_at DESC NULLS LAST, e.execution_id DESC
"""

# A step's counters arrive with step_finished; until then (a running or interrupted step) they
# are counted from its recorded attempts, as the executor counts them: a refused connection
# put nothing on the wire and is no dispatch.
_STEPS_SQL = """
WITH so_far AS (
    SELECT
        step_id,
        count(*) FILTER (
            WHERE dispatched AND transport_error IS DISTINCT FROM 'connect'
        ) AS dispatch_count,
        max(attempt_number) AS attempts_count,
        count(*) FILTER (WHERE action = 'retry_corrected') AS validation_retries,
        count(*) FILTER (
            WHERE action = 'retry_corrected' AND decision_layer = 're_resolution'
        ) AS semantic_retries
    FROM attempts
    WHERE execution_id = $execution_id
    GROUP BY step_id
)
SELECT
    step_id, tool, capability, url, coalesce(depends_on, []) AS depends_on, parameters,
    protected_keys, orchestrator, side_effects, status,
    coalesce(s.dispatch_count, so_far.dispatch_count, 0) AS dispatch_count,
    coalesce(s.attempts, so_far.attempts_count, 0) AS attempts_count,
    coalesce(s.validation_retries, so_far.validation_retries, 0) AS validation_retries,
    coalesce(s.semantic_retries, so_far.semantic_retries, 0) AS semantic_retries,
    final_action, final_rule_id, error, result, skip_reason,
    epoch(started_at) AS started_at, epoch(finished_at) AS finished_at
FROM steps AS s
LEFT JOIN so_far USING (step_id)
WHERE s.execution_id = $execution_id
ORDER BY coalesce(started_at, finished_at) NULLS LAST, step_id
"""

_ATTEMPTS_SQL = """
SELECT
    step_id, n, attempt_number, dispatched, parameters, correction_layer, method, url,
    request_headers, request_body, request_size, status, response_headers, response_body,
    response_size, transport_error, transport_error_message, elapsed_ms, retry_policy, action,
    rule_id, reason, decision, decision_layer, corrected_parameters, delay_ms, delay_source,
    recovery, impact, epoch(started_at) AS started_at, epoch(responded_at) AS responded_at,
    epoch(decided_at) AS decided_at
FROM attempts
WHERE execution_id = $execution_id
ORDER BY step_id, n
"""

_LLM_CALLS_SQL = """
SELECT
    call_id, step_id, n, site, model, base_url, temperature, max_tokens, messages, request_body,
    request_size, response_status, response_body, response_size, raw_text, parsed, parse_error,
    error, prompt_tokens, completion_tokens, total_tokens, latency_ms,
    epoch(called_at) AS called_at
FROM llm_calls
WHERE execution_id = $execution_id
ORDER BY called_at, call_id
"""

_EVENTS_SQL = """
SELECT step_id, n, seq, epoch(occurred_at) AS occurred_at, kind, name, message, attrs
FROM events
WHERE execution_id = $execution_id
ORDER BY occurred_at, seq
"""

_BACKOFFS_SQL = """
SELECT step_id, n, epoch(planned_at) AS planned_at, planned_ms, delay_source, actual_ms, outcome
FROM backoffs
WHERE execution_id = $execution_id
"""

_JSON_COLUMNS = frozenset(
    {
        "parameters",
        "protected_keys",
        "result",
        "request_headers",
        "response_headers",
        "decision",
        "corrected_parameters",
        "messages",
        "parsed",
        "attrs",
        "plan",
        "config",
        "config_sources",
        "llm",
    }
)


def _dicts(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Result rows as dicts, JSON columns decoded and lists as tuples."""
    names = [column[0] for column in cursor.description or ()]
    rows = []
    for values in cursor.fetchall():
        row = dict(zip(names, values, strict=True))
        for name, value in row.items():
            if name in _JSON_COLUMNS and isinstance(value, str):
                row[name] = json.loads(value)
            elif isinstance(value, list):
                row[name] = tuple(value)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# Store
# ---------------------------------------------------------------------------------------------


class Store:
    """A debug store file; each query opens it briefly. Build with `open_store()`."""

    def __init__(self, paths: StorePaths, *, lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S):
        self.paths = paths
        self.lock_timeout_s = lock_timeout_s

    @property
    def path(self) -> str:
        """The database file path as the user gave it."""
        return self.paths.label

    @contextmanager
    def session(self, *, create: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for several queries, after ingesting the spool; hold it briefly.

        A store this process may not write is opened read-only, as it is: its spool is not
        ingested and no execution is marked interrupted.
        """
        read_only = not create and not store_is_writable(self.paths)
        with session(
            self.paths, create=create, read_only=read_only, lock_timeout_s=self.lock_timeout_s
        ) as conn:
            if not read_only:
                maintain(conn, self.paths)
            yield conn

    def refresh(self) -> None:
        """Ingest waiting spool segments and mark executions of dead writers interrupted."""
        with self.session():
            pass

    def list_executions(
        self, filters: ExecutionFilter | None = None, *, limit: int = 50, offset: int = 0
    ) -> Page:
        """One page of executions matching `filters`, newest first, with the total count."""
        filters = filters or ExecutionFilter()
        with self.session() as conn:
            where, params = _filter_sql(filters)
            where, params = _with_warning_filter(conn, filters, where, params)
            page_sql = (
                f"WITH page AS (SELECT e.execution_id FROM executions AS e WHERE {where} "
                "ORDER BY e.started_at DESC NULLS LAST, e.execution_id DESC "
                "LIMIT $limit OFFSET $offset), "
            )
            total_row = conn.execute(
                f"SELECT count(*) FROM executions AS e WHERE {where}", params
            ).fetchone()
            rows = _dicts(
                conn.execute(
                    page_sql + _ROWS_FOR_PAGE,
                    {**params, "limit": int(limit), "offset": int(offset)},
                )
            )
            warned = _warning_counts(conn, [row["execution_id"] for row in rows])
        return Page(
            executions=tuple(
                ExecutionRow(**row, contract_warnings=warned.get(row["execution_id"], 0))
                for row in rows
            ),
            total=int(total_row[0]) if total_row else 0,
            limit=limit,
            offset=offset,
        )

    def resolve_execution_id(self, conn: duckdb.DuckDBPyConnection, id_or_prefix: str) -> str:
        """The one execution id equal to, or else starting with, `id_or_prefix`."""
        matches = [
            row[0]
            for row in conn.execute(
                "SELECT execution_id FROM executions WHERE starts_with(execution_id, $prefix) "
                "ORDER BY execution_id = $prefix DESC, execution_id LIMIT 6",
                {"prefix": id_or_prefix},
            ).fetchall()
        ]
        if not matches or not id_or_prefix:
            raise ExecutionNotFoundError(
                f"{self.path}: no execution id starts with {id_or_prefix!r}"
            )
        if matches[0] == id_or_prefix or len(matches) == 1:
            return matches[0]
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise ExecutionNotFoundError(
            f"{self.path}: {id_or_prefix!r} matches several executions ({shown}); "
            "give more of the id"
        )

    def get_execution(self, execution_id: str) -> ExecutionDetail:
        """Everything recorded about one execution; a unique prefix of its id is enough."""
        with self.session() as conn:
            resolved = self.resolve_execution_id(conn, execution_id)
            params = {"execution_id": resolved}
            row = _dicts(
                conn.execute(
                    "WITH page AS (SELECT $execution_id AS execution_id), " + _ROWS_FOR_PAGE,
                    params,
                )
            )[0]
            snapshot_rows = _dicts(
                conn.execute(
                    "SELECT plan, config, config_sources, llm FROM execution_snapshots "
                    "WHERE execution_id = $execution_id",
                    params,
                )
            )
            step_rows = _dicts(conn.execute(_STEPS_SQL, params))
            attempt_rows = _dicts(conn.execute(_ATTEMPTS_SQL, params))
            llm_rows = _dicts(conn.execute(_LLM_CALLS_SQL, params))
            event_rows = _dicts(conn.execute(_EVENTS_SQL, params))
            backoff_rows = _dicts(conn.execute(_BACKOFFS_SQL, params))
        snapshot = snapshot_rows[0] if snapshot_rows else {}
        return _assemble_detail(
            ExecutionRow(**row), snapshot, step_rows, attempt_rows, llm_rows, event_rows,
            backoff_rows,
        )  # fmt: skip

    def summary_counts(self, filters: ExecutionFilter | None = None) -> dict[str, Any]:
        """Counts of matching executions by status and of their attempts by action, rule, status."""
        filters = filters or ExecutionFilter()
        counts: dict[str, Any] = {}
        with self.session() as conn:
            where, params = _with_warning_filter(conn, filters, *_filter_sql(filters))
            matched = f"SELECT e.execution_id FROM executions AS e WHERE {where}"
            counts["executions_by_status"] = dict(
                conn.execute(
                    f"SELECT e.status, count(*) FROM executions AS e WHERE {where} "
                    "GROUP BY e.status ORDER BY count(*) DESC, e.status",
                    params,
                ).fetchall()
            )
            for key, column in (
                ("attempts_by_action", "action"),
                ("attempts_by_rule", "rule_id"),
                ("attempts_by_http_status", "status"),
            ):
                counts[key] = dict(
                    conn.execute(
                        f"SELECT {column}, count(*) FROM attempts "
                        f"WHERE execution_id IN ({matched}) "
                        f"GROUP BY {column} ORDER BY count(*) DESC, {column} NULLS LAST",
                        params,
                    ).fetchall()
                )
        counts["executions"] = sum(counts["executions_by_status"].values())
        counts["attempts"] = sum(counts["attempts_by_action"].values())
        return counts


def llm_text_not_recorded_note(config: Any, config_sources: Any) -> str:
    """Why an LLM call's prompt and response text are not in the store, from the run's config."""
    config = config if isinstance(config, dict) else {}
    sources = config_sources if isinstance(config_sources, dict) else {}
    if config.get("llm_debug_enabled") is not False:
        return "the prompt and response text were not recorded"
    where = {
        "env": "TRUVAG3_LLM_DEBUG_ENABLED",
        "explicit": "plan config llm_debug_enabled",
    }.get(sources.get("llm_debug_enabled"), "the run's config")
    return f"text not recorded: llm_debug_enabled is false ({where})"


def _assemble_detail(
    execution: ExecutionRow,
    snapshot: dict[str, Any],
    step_rows: list[dict[str, Any]],
    attempt_rows: list[dict[str, Any]],
    llm_rows: list[dict[str, Any]],
    event_rows: list[dict[str, Any]],
    backoff_rows: list[dict[str, Any]],
) -> ExecutionDetail:
    """Nest attempts, LLM calls, events and backoffs under their steps."""
    llm_by_attempt: dict[tuple[Any, Any], list[LLMCallRecord]] = defaultdict(list)
    text_note = llm_text_not_recorded_note(snapshot.get("config"), snapshot.get("config_sources"))
    for row in llm_rows:
        # Recorded calls always have a messages array; NULL means the text was left out.
        call = LLMCallRecord(**row, text_note=text_note if row["messages"] is None else None)
        llm_by_attempt[(call.step_id, call.n)].append(call)
    events_by_attempt: dict[tuple[Any, Any], list[EventRecord]] = defaultdict(list)
    for row in event_rows:
        event = EventRecord(**row)
        events_by_attempt[(event.step_id, event.n)].append(event)
    backoff_by_attempt = {
        (row.pop("step_id"), row.pop("n")): BackoffRecord(**row) for row in backoff_rows
    }
    attempts_by_step: dict[str, list[AttemptRecord]] = defaultdict(list)
    for row in attempt_rows:
        key = (row["step_id"], row["n"])
        attempts_by_step[row["step_id"]].append(
            AttemptRecord(
                **row,
                llm_calls=tuple(llm_by_attempt.pop(key, ())),
                events=tuple(events_by_attempt.pop(key, ())),
                backoff=backoff_by_attempt.get(key),
            )
        )
    steps = []
    for row in step_rows:
        step_id = row["step_id"]
        # Records at the step but not at a recorded attempt (e.g. a call before any dispatch).
        step_llm = [call for key, calls in llm_by_attempt.items() if key[0] == step_id
                    for call in calls]  # fmt: skip
        step_events = [event for key, events in events_by_attempt.items() if key[0] == step_id
                       for event in events]  # fmt: skip
        steps.append(
            StepRecord(
                **row,
                attempts=tuple(attempts_by_step.get(step_id, ())),
                events=tuple(step_events),
                llm_calls=tuple(step_llm),
            )
        )
    step_ids = {step.step_id for step in steps}
    execution_events = tuple(
        event for key, events in events_by_attempt.items() if key[0] not in step_ids
        for event in events
    )  # fmt: skip
    execution_llm_calls = tuple(
        call for key, calls in llm_by_attempt.items() if key[0] not in step_ids for call in calls
    )
    return ExecutionDetail(
        execution=execution,
        plan=snapshot.get("plan"),
        config=snapshot.get("config"),
        config_sources=snapshot.get("config_sources"),
        llm=snapshot.get("llm"),
        steps=tuple(steps),
        events=execution_events,
        llm_calls=execution_llm_calls,
    )


def open_store(
    path: str | os.PathLike[str],
    *,
    create: bool = False,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> Store:
    """Open the store at `path`, checking the file and its schema version first.

    Raises StoreOpenError (missing, unreadable, not DuckDB, not a store, newer schema) or
    StoreBusyError; a file that is not a store is never written.
    """
    paths = store_paths(path)
    check_store_file(paths, create=create)
    store = Store(paths, lock_timeout_s=lock_timeout_s)
    with store.session(create=create):
        pass
    return store
