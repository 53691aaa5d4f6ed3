"""Headless queries over the debug store: open, list with filters, one execution, summary counts.

Every call opens the file for a moment (waiting briefly if another process has it), first
ingests waiting spool segments and marks executions of dead writers `interrupted`, runs its SQL
and closes, so a recorder in another process is never locked out for long. Times are returned
as epoch seconds (float, UTC); durations in milliseconds.

Longer than ~600 lines on purpose: it is the store's one read API, a `Store` whose every method
is one short session with that discipline, and the filter SQL they all share; the records they
return live in `store.records`.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
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
from store.records import (
    ACTIONS,
    ATTEMPT_LAZY_JSON,
    EXECUTION_STATUSES,
    STEP_STATUSES,
    AttemptRecord,
    BackoffRecord,
    EventRecord,
    ExecutionDetail,
    ExecutionRow,
    LLMCallRecord,
    Page,
    StepRecord,
    UndecodedJSON,
    body_view,
    to_jsonable,
)

# The records are part of the query API; they are defined in `store.records`.
__all__ = [
    "ACTIONS",
    "EXECUTION_STATUSES",
    "STEP_STATUSES",
    "AttemptRecord",
    "BackoffRecord",
    "EventRecord",
    "ExecutionDetail",
    "ExecutionFilter",
    "ExecutionOutline",
    "ExecutionRow",
    "LLMCallRecord",
    "Page",
    "StepRecord",
    "Store",
    "body_view",
    "llm_text_not_recorded_note",
    "open_store",
    "to_jsonable",
]


@dataclass(frozen=True, slots=True)
class ExecutionFilter:
    """Which executions to list; unset fields do not filter.

    `tool`, `capability`, `action`, `rule_id` and `http_status` must all hold for one attempt
    (or, for tool and capability alone, one step). `since` (inclusive) and `until` (exclusive)
    bound `started_at` in epoch seconds. `text` is searched, case-insensitively, in request and
    response bodies, LLM prompt messages and raw LLM answers. `capability` may be `tool.capability`.
    `test` is a part of the `test` label (a pytest node id, recorded by `pytest --truva-db`).
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
    test: str | None = None
    warning: str | None = None




# ---------------------------------------------------------------------------------------------
# SQL
# ---------------------------------------------------------------------------------------------


# Both tables keep a lower-cased decoded `search_text` (store.schema), so a search reads text.
# The matching executions go into a temporary table of the session, so that the count, the
# page and the summary's queries that all filter on them scan the texts once, and join them
# (a list of ids passed back as a parameter made each row's test linear in the matches).
_TEXT_MATCHES = """
CREATE OR REPLACE TEMP TABLE text_matches AS
SELECT execution_id FROM attempts WHERE contains(search_text, $text)
UNION
SELECT execution_id FROM llm_calls WHERE contains(search_text, $text)
"""


def _filter_sql(
    conn: duckdb.DuckDBPyConnection, filters: ExecutionFilter
) -> tuple[str, dict[str, Any]]:
    """A WHERE condition on `executions AS e` and its named parameters, valid in `conn`'s session.

    A text filter is searched here, once, into the session's `text_matches` table.
    """
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if filters.status:  # one status, or several joined by commas: any of them
        clauses.append("list_contains($statuses, e.status)")
        params["statuses"] = filters.status.split(",")
    if filters.since is not None:
        clauses.append("e.started_at >= make_timestamptz(CAST(round($since * 1000000) AS BIGINT))")
        params["since"] = float(filters.since)
    if filters.until is not None:
        clauses.append("e.started_at < make_timestamptz(CAST(round($until * 1000000) AS BIGINT))")
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
        attempt_conditions.append("a.http_status = $http_status")
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
    if filters.test:
        clauses.append("contains(json_extract_string(e.labels, '$.test'), $test)")
        params["test"] = filters.test
    if filters.text:
        conn.execute(_TEXT_MATCHES, {"text": filters.text.lower()})
        clauses.append("e.execution_id IN (SELECT execution_id FROM text_matches)")
    return (" AND ".join(clauses) or "TRUE"), params


_RESPONSES = """
SELECT a.execution_id, a.http_status, a.response_body FROM attempts AS a
WHERE a.dispatched AND a.http_status > 0 AND a.response_body IS NOT NULL AND {scope}
"""


def _warning_counts(conn: duckdb.DuckDBPyConnection, execution_ids: list[str]) -> dict[str, int]:
    """How many recorded responses of each execution break the tool contract (executor.contract)."""
    if not execution_ids:
        return {}
    counts: dict[str, int] = defaultdict(int)
    # A join on the ids, not list_contains($ids, ...) per attempt row: linear in both.
    scope = "a.execution_id IN (SELECT unnest($ids))"
    cursor = conn.execute(_RESPONSES.format(scope=scope), {"ids": execution_ids})
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
    return f"({where}) AND e.execution_id IN (SELECT unnest($warned_ids))", {
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
    SELECT
        execution_id, count(*) AS llm_calls,
        CAST(sum(total_tokens) AS BIGINT) AS llm_total_tokens
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
    e.rerun_of,
    e.labels
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
# `n` numbers a step's attempts; the policy's attempt counter is derived from them: it starts
# at 1 and only a `retry_same` decision advances it (an accepted correction does not).
_NUMBERED_ATTEMPTS = """
numbered AS (
    SELECT *, 1 + coalesce(sum(CASE WHEN action = 'retry_same' THEN 1 ELSE 0 END) OVER (
        PARTITION BY step_id ORDER BY n ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ), 0) AS attempt_number
    FROM attempts
    WHERE execution_id = $execution_id
)
"""

_STEPS_SQL = f"""
WITH {_NUMBERED_ATTEMPTS}, so_far AS (
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
    FROM numbered
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

_ATTEMPTS_SQL = f"""
WITH {_NUMBERED_ATTEMPTS}
SELECT
    step_id, n, attempt_number, dispatched, parameters, correction_layer, method, url,
    request_headers, request_body, request_size, http_status AS status, response_headers,
    response_body,
    response_size, transport_error, transport_error_message, elapsed_ms, retry_policy, action,
    rule_id, reason, decision, decision_layer, corrected_parameters, delay_ms, delay_source,
    recovery, impact, epoch(started_at) AS started_at, epoch(responded_at) AS responded_at,
    epoch(decided_at) AS decided_at
FROM numbered
ORDER BY step_id, n
"""

# The prompt messages are read from the request bytes (`llm_calls_text.messages`).
_LLM_CALLS_SQL = """
SELECT
    l.call_id, l.step_id, l.n, l.site, l.model, l.base_url, l.temperature, l.max_tokens,
    t.messages, l.request_body, l.request_size, l.response_status, l.response_body,
    l.response_size, l.raw_text, l.parsed, l.parse_error, l.error, l.prompt_tokens,
    l.completion_tokens, l.total_tokens, l.latency_ms, epoch(l.called_at) AS called_at,
    l.response_headers
FROM llm_calls AS l
JOIN llm_calls_text AS t USING (call_id)
WHERE l.execution_id = $execution_id
ORDER BY l.called_at, l.call_id
"""

# The same calls without their texts (the prompts are most of an execution's bytes): the
# texts come later from `_LLM_TEXTS_SQL`, for the calls being shown. Whether a call has its
# text is asked as a filter (`request_body IS NULL` in a WHERE), which DuckDB answers from
# the column's validity; as a selected `request_body IS NOT NULL` it read every prompt's bytes
# (~5 ms of a 200-call execution's read). `call_id` is the key, never NULL, so NOT IN is exact.
_LLM_CALLS_WITHOUT_TEXTS_SQL = """
SELECT
    l.call_id, l.step_id, l.n, l.site, l.model, l.base_url, l.temperature, l.max_tokens,
    NULL AS messages, NULL AS request_body, l.request_size, l.response_status,
    NULL AS response_body, l.response_size, NULL AS raw_text, l.parsed, l.parse_error, l.error,
    l.prompt_tokens, l.completion_tokens, l.total_tokens, l.latency_ms,
    epoch(l.called_at) AS called_at, l.response_headers,
    l.call_id NOT IN (
        SELECT call_id FROM llm_calls
        WHERE execution_id = $execution_id AND request_body IS NULL
    ) AS text_in_store
FROM llm_calls AS l
WHERE l.execution_id = $execution_id
ORDER BY l.called_at, l.call_id
"""

_LLM_TEXTS_SQL = """
SELECT l.call_id, t.messages, l.request_body, l.response_body, l.raw_text
FROM llm_calls AS l
JOIN llm_calls_text AS t USING (call_id)
WHERE l.execution_id = $execution_id AND list_contains($call_ids, l.call_id)
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

# `execution_steps` reads a few steps at a time with the statements above, narrowed to them.
_CHOSEN_STEPS = "step_id IN (SELECT unnest($step_ids))"


def _outside_steps(step_id: str) -> str:
    """The condition that `step_id` is none of the execution's steps."""
    return (
        f"({step_id} IS NULL OR {step_id} NOT IN "
        "(SELECT step_id FROM steps WHERE execution_id = $execution_id))"
    )


def _narrowed(sql: str, *wheres: tuple[str, str]) -> str:
    """`sql` with each `(where, condition)`: the clause `where`, found once, ANDed with
    `condition`."""
    for where, condition in wheres:
        if sql.count(where) != 1:
            raise ValueError(f"{where!r} is not in the statement exactly once")
        sql = sql.replace(where, f"{where} AND {condition}")
    return sql


_ATTEMPTS_OF_EXECUTION = "FROM attempts\n    WHERE execution_id = $execution_id"
_STEP_IDS_SQL = """
SELECT step_id FROM steps
WHERE execution_id = $execution_id
ORDER BY coalesce(epoch(started_at), epoch(finished_at)) NULLS LAST, step_id
"""
_CHOSEN_STEPS_SQL = _narrowed(
    _STEPS_SQL,
    (_ATTEMPTS_OF_EXECUTION, _CHOSEN_STEPS),
    ("WHERE s.execution_id = $execution_id", "s." + _CHOSEN_STEPS),
)
_CHOSEN_STEPS_ATTEMPTS_SQL = _narrowed(_ATTEMPTS_SQL, (_ATTEMPTS_OF_EXECUTION, _CHOSEN_STEPS))
_CHOSEN_STEPS_LLM_CALLS_SQL = _narrowed(
    _LLM_CALLS_SQL, ("WHERE l.execution_id = $execution_id", "l." + _CHOSEN_STEPS)
)
_CHOSEN_STEPS_EVENTS_SQL = _narrowed(
    _EVENTS_SQL, ("WHERE execution_id = $execution_id", _CHOSEN_STEPS)
)
_CHOSEN_STEPS_BACKOFFS_SQL = _narrowed(
    _BACKOFFS_SQL, ("WHERE execution_id = $execution_id", _CHOSEN_STEPS)
)
_OUTSIDE_STEPS_LLM_CALLS_SQL = _narrowed(
    _LLM_CALLS_SQL, ("WHERE l.execution_id = $execution_id", _outside_steps("l.step_id"))
)
_OUTSIDE_STEPS_EVENTS_SQL = _narrowed(
    _EVENTS_SQL, ("WHERE execution_id = $execution_id", _outside_steps("step_id"))
)

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
        "labels",
        "plan",
        "config",
        "config_sources",
        "llm",
    }
)


def _dicts(
    cursor: duckdb.DuckDBPyConnection, *, lazy: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """Result rows as dicts, JSON columns decoded and lists as tuples.

    The JSON columns named in `lazy` are left as `UndecodedJSON`, for a record field that
    decodes itself when read (`store.records.ATTEMPT_LAZY_JSON`).
    """
    description = cursor.description or ()
    names = [column[0] for column in description]
    # Only the columns that can need it are looked at: JSON by name, lists by their type.
    json_at = [index for index, name in enumerate(names)
               if name in _JSON_COLUMNS and name not in lazy]  # fmt: skip
    lazy_at = [index for index, name in enumerate(names) if name in lazy]
    list_at = [index for index, column in enumerate(description) if str(column[1]).endswith("]")]
    rows = []
    for values in cursor.fetchall():
        if json_at or list_at or lazy_at:
            values = list(values)
            for index in json_at:
                if isinstance(values[index], str):
                    values[index] = json.loads(values[index])
            for index in lazy_at:
                if isinstance(values[index], str):
                    values[index] = UndecodedJSON(values[index])
            for index in list_at:
                if isinstance(values[index], list):
                    values[index] = tuple(values[index])
        rows.append(dict(zip(names, values, strict=True)))
    return rows


# ---------------------------------------------------------------------------------------------
# Store
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExecutionOutline:
    """An execution without its steps (`Store.execution_outline`): `detail` has none, and
    `step_ids` names them in order."""

    detail: ExecutionDetail
    step_ids: tuple[str, ...]

    @property
    def execution_id(self) -> str:
        """The execution's full id."""
        return self.detail.execution.execution_id


def _execution_head(
    conn: duckdb.DuckDBPyConnection, params: dict[str, Any]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One execution's list row (with its counts) and its snapshot rows (none or one)."""
    row = _dicts(
        conn.execute(
            "WITH page AS (SELECT $execution_id AS execution_id), " + _ROWS_FOR_PAGE, params
        )
    )[0]
    snapshot_rows = _dicts(
        conn.execute(
            "SELECT plan, config, config_sources, llm FROM execution_snapshots "
            "WHERE execution_id = $execution_id",
            params,
        )
    )
    return row, snapshot_rows


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
            where, params = _with_warning_filter(conn, filters, *_filter_sql(conn, filters))
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

    def matching_execution_ids(self, filters: ExecutionFilter | None = None) -> list[str]:
        """Every execution id `list_executions` would list for `filters`, oldest first."""
        filters = filters or ExecutionFilter()
        with self.session() as conn:
            where, params = _with_warning_filter(conn, filters, *_filter_sql(conn, filters))
            rows = conn.execute(
                f"SELECT e.execution_id FROM executions AS e WHERE {where} "
                "ORDER BY e.started_at NULLS FIRST, e.execution_id",
                params,
            ).fetchall()
        return [row[0] for row in rows]

    def recorded_decisions(
        self, execution_ids: list[str], *, skip_rules: list[str] | None = None
    ) -> tuple[
        list[tuple[str, str, int, str | None, str | None, str | None, float | None]], int
    ]:
        """(execution id, step id, n, action, rule id, decision inputs as JSON text, the
        decision's wait before a resend in ms) of every decided attempt of `execution_ids`, in
        execution, step and attempt order, and how many decided attempts were left out because
        their rule id is in `skip_rules`."""
        skip = list(skip_rules or [])
        where = "a.execution_id IN (SELECT unnest($ids)) AND a.action IS NOT NULL"
        with self.session() as conn:
            skipped_row = conn.execute(
                f"SELECT count(*) FROM attempts AS a WHERE {where} "
                "AND list_contains($skip, a.rule_id)",
                {"ids": execution_ids, "skip": skip},
            ).fetchone() if skip else (0,)
            rows = conn.execute(
                "SELECT a.execution_id, a.step_id, a.n, a.action, a.rule_id, "
                "CAST(json_extract(a.decision, '$.inputs') AS VARCHAR), a.delay_ms "
                "FROM attempts AS a JOIN executions AS e USING (execution_id) "
                f"WHERE {where} AND NOT list_contains($skip, coalesce(a.rule_id, '')) "
                "ORDER BY e.started_at NULLS FIRST, a.execution_id, a.step_id, a.n",
                {"ids": execution_ids, "skip": skip},
            ).fetchall()
        return rows, int(skipped_row[0]) if skipped_row else 0

    def tool_responses(
        self, *, tool: str | None = None, batch_rows: int = 5_000
    ) -> Iterator[list[tuple[str, str | None, str, str, int, int, str | None, bytes | None]]]:
        """Batches of every answered attempt as (tool, capability, execution id, step id, n,
        HTTP status, response headers JSON, response body), by tool, capability, execution,
        step and attempt; only `tool`'s when given."""
        where = "a.dispatched AND a.http_status IS NOT NULL AND a.http_status > 0"
        params: dict[str, Any] = {}
        if tool:
            where += " AND s.tool = $tool"
            params["tool"] = tool
        with self.session() as conn:
            cursor = conn.execute(
                "SELECT s.tool, s.capability, a.execution_id, a.step_id, a.n, a.http_status, "
                "CAST(a.response_headers AS VARCHAR), a.response_body "
                "FROM attempts AS a JOIN steps AS s USING (execution_id, step_id) "
                f"WHERE {where} ORDER BY s.tool, s.capability, a.execution_id, a.step_id, a.n",
                params,
            )
            while batch := cursor.fetchmany(batch_rows):
                yield batch

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

    def executions_in_order(
        self, conn: duckdb.DuckDBPyConnection, *, since: datetime | None = None
    ) -> tuple[list[str], list[str]]:
        """Every execution id, oldest first, as (finished, still running).

        `since` (a naive UTC datetime) keeps those started at or after it.
        """
        rows = conn.execute(
            "SELECT execution_id, status = 'running' FROM executions "
            "WHERE $since IS NULL OR started_at >= timezone('UTC', CAST($since AS TIMESTAMP)) "
            "ORDER BY started_at NULLS LAST, execution_id",
            {"since": since},
        ).fetchall()
        return (
            [execution_id for execution_id, running in rows if not running],
            [execution_id for execution_id, running in rows if running],
        )

    def resolve_finished(
        self,
        conn: duckdb.DuckDBPyConnection,
        requested: Sequence[str],
        still_running: Callable[[str], Exception],
    ) -> list[str]:
        """The executions named by ids or unique prefixes, each once, in the order given.

        `still_running(execution_id)` is raised for one that is still running.
        """
        chosen: list[str] = []
        for id_or_prefix in requested:
            execution_id = self.resolve_execution_id(conn, id_or_prefix)
            status = conn.execute(
                "SELECT status FROM executions WHERE execution_id = $id", {"id": execution_id}
            ).fetchone()
            if status is not None and status[0] == "running":
                raise still_running(execution_id)
            if execution_id not in chosen:
                chosen.append(execution_id)
        return chosen

    def get_execution(self, execution_id: str, *, llm_texts: bool = True) -> ExecutionDetail:
        """Everything recorded about one execution; a unique prefix of its id is enough.

        `llm_texts=False` leaves out the LLM calls' prompts and answers (each call has
        `texts_loaded` False); `llm_call_texts` reads them for the calls being shown.
        """
        with self.session() as conn:
            resolved = self.resolve_execution_id(conn, execution_id)
            params = {"execution_id": resolved}
            row, snapshot_rows = _execution_head(conn, params)
            step_rows = _dicts(conn.execute(_STEPS_SQL, params))
            attempt_rows = _dicts(conn.execute(_ATTEMPTS_SQL, params), lazy=ATTEMPT_LAZY_JSON)
            llm_sql = _LLM_CALLS_SQL if llm_texts else _LLM_CALLS_WITHOUT_TEXTS_SQL
            llm_rows = _dicts(conn.execute(llm_sql, params))
            event_rows = _dicts(conn.execute(_EVENTS_SQL, params))
            backoff_rows = _dicts(conn.execute(_BACKOFFS_SQL, params))
        snapshot = snapshot_rows[0] if snapshot_rows else {}
        return _assemble_detail(
            ExecutionRow(**row), snapshot, step_rows, attempt_rows, llm_rows, event_rows,
            backoff_rows,
        )  # fmt: skip

    def execution_outline(self, execution_id: str) -> ExecutionOutline:
        """One execution without its steps, for reading them a few at a time
        (`execution_steps`); a unique prefix of its id is enough.

        Its `detail` is what `get_execution` gives with `steps` left empty: the row with its
        counts, the snapshot, and what was recorded outside any step; `step_ids` are its steps
        in `get_execution`'s order.
        """
        with self.session() as conn:
            resolved = self.resolve_execution_id(conn, execution_id)
            params = {"execution_id": resolved}
            row, snapshot_rows = _execution_head(conn, params)
            step_ids = tuple(row[0] for row in conn.execute(_STEP_IDS_SQL, params).fetchall())
            llm_rows = _dicts(conn.execute(_OUTSIDE_STEPS_LLM_CALLS_SQL, params))
            event_rows = _dicts(conn.execute(_OUTSIDE_STEPS_EVENTS_SQL, params))
        snapshot = snapshot_rows[0] if snapshot_rows else {}
        detail = _assemble_detail(ExecutionRow(**row), snapshot, [], [], llm_rows, event_rows, [])
        return ExecutionOutline(detail, step_ids)

    def execution_steps(
        self, outline: ExecutionOutline, step_ids: Sequence[str]
    ) -> tuple[StepRecord, ...]:
        """The steps `step_ids` of the outlined execution, as `get_execution` gives them (in
        its order), each with its attempts, LLM calls, events and backoffs."""
        params = {"execution_id": outline.execution_id, "step_ids": list(step_ids)}
        with self.session() as conn:
            step_rows = _dicts(conn.execute(_CHOSEN_STEPS_SQL, params))
            attempt_rows = _dicts(
                conn.execute(_CHOSEN_STEPS_ATTEMPTS_SQL, params), lazy=ATTEMPT_LAZY_JSON
            )
            llm_rows = _dicts(conn.execute(_CHOSEN_STEPS_LLM_CALLS_SQL, params))
            event_rows = _dicts(conn.execute(_CHOSEN_STEPS_EVENTS_SQL, params))
            backoff_rows = _dicts(conn.execute(_CHOSEN_STEPS_BACKOFFS_SQL, params))
        detail = outline.detail
        return _assemble_detail(
            detail.execution, {"config": detail.config, "config_sources": detail.config_sources},
            step_rows, attempt_rows, llm_rows, event_rows, backoff_rows,
        ).steps  # fmt: skip

    def execution_step(self, outline: ExecutionOutline, step_id: str) -> StepRecord:
        """The outlined execution's step `step_id`, read alone; StepNotFoundError (as
        `ExecutionDetail.step` words it) names the steps there are."""
        found = self.execution_steps(outline, [step_id])
        if not found:
            known = ", ".join(outline.step_ids) or "none recorded"
            raise StepNotFoundError(
                f"execution {outline.execution_id} has no step {step_id!r} (steps: {known})"
            )
        return found[0]

    def llm_call_texts(
        self, execution_id: str, call_ids: list[str]
    ) -> dict[str, dict[str, Any]]:
        """The texts `get_execution(..., llm_texts=False)` left out, by call id: `messages`,
        `request_body`, `response_body` and `raw_text` of each of `call_ids` of the execution."""
        with self.session() as conn:
            rows = _dicts(conn.execute(
                _LLM_TEXTS_SQL, {"execution_id": execution_id, "call_ids": list(call_ids)}))
        return {row.pop("call_id"): row for row in rows}

    def summary_counts(self, filters: ExecutionFilter | None = None) -> dict[str, Any]:
        """Counts of matching executions by status and of their attempts by action, rule, status."""
        filters = filters or ExecutionFilter()
        counts: dict[str, Any] = {}
        with self.session() as conn:
            where, params = _with_warning_filter(conn, filters, *_filter_sql(conn, filters))
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
                ("attempts_by_http_status", "http_status"),
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
        # A recorded call always has its request bytes (empty when none was sent); NULL means
        # the text was left out.
        loaded = "text_in_store" not in row
        recorded = row["request_body"] is not None if loaded else row.pop("text_in_store")
        call = LLMCallRecord(**row, text_note=None if recorded else text_note,
                             texts_loaded=loaded or not recorded)  # fmt: skip
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
