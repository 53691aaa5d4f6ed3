"""The debug store's SQL schema, its version, and forward migrations applied on open."""

from __future__ import annotations

import contextlib
import functools
import json
from dataclasses import dataclass

import duckdb

from store.decision_keys import refresh_stored_keys_sql, stored_key_sql, stored_key_version_sql
from store.errors import StoreOpenError


@dataclass(frozen=True, slots=True)
class Migration:
    """Statements that take a store from `version - 1` to `version`, run in one transaction."""

    version: int
    description: str
    statements: tuple[str, ...]


# One row per backoff wait: planned vs actual (the `backoffs` view).
_BACKOFFS_SELECT = """
    SELECT
        execution_id,
        step_id,
        n,
        min(occurred_at) AS planned_at,
        max(CAST(attrs ->> 'planned_ms' AS DOUBLE)) AS planned_ms,
        max(attrs ->> 'source') AS delay_source,
        max(CAST(attrs ->> 'actual_ms' AS DOUBLE))
            FILTER (WHERE name IN ('finished', 'cancelled')) AS actual_ms,
        max(name) FILTER (WHERE name IN ('finished', 'cancelled')) AS outcome
    FROM events
    WHERE kind = 'backoff'
    GROUP BY execution_id, step_id, n
"""

# Version 1 kept timestamps as naive UTC TIMESTAMP (version 3 makes them TIMESTAMPTZ);
# durations are DOUBLE milliseconds; JSON values are DuckDB JSON; bodies are BLOB, byte-exact.
_SCHEMA_V1 = (
    """
    CREATE TABLE schema_info (
        key VARCHAR PRIMARY KEY,
        value VARCHAR NOT NULL
    )
    """,
    """
    CREATE TABLE executions (
        execution_id VARCHAR PRIMARY KEY,
        status VARCHAR NOT NULL,
        started_at TIMESTAMP,
        finished_at TIMESTAMP,
        query VARCHAR,
        plan_path VARCHAR,
        stop_reason VARCHAR,
        incomplete_steps VARCHAR[],
        llm_calls INTEGER,
        llm_total_tokens BIGINT,
        tool_version VARCHAR,
        writer_pid INTEGER,
        writer_host VARCHAR,
        writer_token VARCHAR
    )
    """,
    """
    CREATE TABLE execution_snapshots (
        execution_id VARCHAR PRIMARY KEY,
        plan JSON,
        config JSON,
        config_sources JSON,
        llm JSON
    )
    """,
    """
    CREATE TABLE steps (
        execution_id VARCHAR NOT NULL,
        step_id VARCHAR NOT NULL,
        tool VARCHAR,
        capability VARCHAR,
        url VARCHAR,
        depends_on VARCHAR[],
        parameters JSON,
        protected_keys JSON,
        orchestrator BOOLEAN,
        side_effects VARCHAR,
        status VARCHAR,
        dispatch_count INTEGER,
        attempts INTEGER,
        validation_retries INTEGER,
        semantic_retries INTEGER,
        final_action VARCHAR,
        final_rule_id VARCHAR,
        error VARCHAR,
        result JSON,
        skip_reason VARCHAR,
        started_at TIMESTAMP,
        finished_at TIMESTAMP,
        PRIMARY KEY (execution_id, step_id)
    )
    """,
    """
    CREATE TABLE attempts (
        execution_id VARCHAR NOT NULL,
        step_id VARCHAR NOT NULL,
        n INTEGER NOT NULL,
        attempt_number INTEGER,
        dispatched BOOLEAN,
        parameters JSON,
        correction_layer VARCHAR,
        method VARCHAR,
        url VARCHAR,
        request_headers JSON,
        request_body BLOB,
        request_size BIGINT,
        status INTEGER,
        response_headers JSON,
        response_body BLOB,
        response_size BIGINT,
        transport_error VARCHAR,
        transport_error_message VARCHAR,
        elapsed_ms DOUBLE,
        retry_policy VARCHAR,
        action VARCHAR,
        rule_id VARCHAR,
        reason VARCHAR,
        decision JSON,
        decision_layer VARCHAR,
        corrected_parameters JSON,
        delay_ms DOUBLE,
        delay_source VARCHAR,
        started_at TIMESTAMP,
        responded_at TIMESTAMP,
        decided_at TIMESTAMP,
        PRIMARY KEY (execution_id, step_id, n)
    )
    """,
    """
    CREATE TABLE llm_calls (
        call_id VARCHAR PRIMARY KEY,
        execution_id VARCHAR NOT NULL,
        step_id VARCHAR,
        n INTEGER,
        site VARCHAR,
        model VARCHAR,
        base_url VARCHAR,
        temperature DOUBLE,
        max_tokens INTEGER,
        messages JSON,
        request_body BLOB,
        request_size BIGINT,
        response_status INTEGER,
        response_body BLOB,
        response_size BIGINT,
        raw_text VARCHAR,
        parsed JSON,
        parse_error VARCHAR,
        error VARCHAR,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        total_tokens INTEGER,
        latency_ms DOUBLE,
        called_at TIMESTAMP
    )
    """,
    """
    CREATE TABLE events (
        execution_id VARCHAR,
        step_id VARCHAR,
        n INTEGER,
        seq BIGINT NOT NULL,
        writer_token VARCHAR,
        occurred_at TIMESTAMP,
        kind VARCHAR NOT NULL,
        name VARCHAR,
        message VARCHAR,
        attrs JSON
    )
    """,
    """
    CREATE TABLE ingested_segments (
        segment VARCHAR PRIMARY KEY,
        ingested_at TIMESTAMP NOT NULL
    )
    """,
    f"CREATE VIEW backoffs AS {_BACKOFFS_SELECT}",
)

# Version 2: a re-run names the execution it re-ran; a final decision its recovery and impact.
_SCHEMA_V2 = (
    "ALTER TABLE executions ADD COLUMN rerun_of VARCHAR",
    "ALTER TABLE attempts ADD COLUMN recovery VARCHAR",
    "ALTER TABLE attempts ADD COLUMN impact VARCHAR",
)



def decoded_text_sql(blob: str) -> str:
    """SQL for a BLOB as text: UTF-8 where valid, else DuckDB's `\\xNN` escapes."""
    return f"coalesce(try(decode({blob})), CAST({blob} AS VARCHAR))"


def attempt_search_text_sql(request_body: str, response_body: str) -> str:
    """SQL for `attempts.search_text`: both bodies decoded and lower-cased, one per line."""
    return (
        f"lower(concat_ws(chr(10), {decoded_text_sql(request_body)}, "
        f"{decoded_text_sql(response_body)}))"
    )


def llm_search_text_sql(request_body: str, unsent_messages: str, raw_text: str) -> str:
    """SQL for `llm_calls.search_text`: the request (or unsent prompt) and the raw answer."""
    return (
        f"lower(concat_ws(chr(10), {decoded_text_sql(request_body)}, "
        f"CAST({unsent_messages} AS VARCHAR), {raw_text}))"
    )


def _attempts_text_view(verb: str, hidden: tuple[str, ...]) -> str:
    """The `attempts_text` view: the attempts with bodies decoded, without the `hidden`
    columns (a view keeps the columns `*` had when it was made: each new column re-makes it)."""
    return f"""
    {verb} VIEW attempts_text AS
    SELECT * EXCLUDE (request_body, response_body, {', '.join(hidden)}),
        {decoded_text_sql("request_body")} AS request_text,
        {decoded_text_sql("response_body")} AS response_text
    FROM attempts
    """


# Columns computed from the row's other columns (at ingest, import and migration); bundles
# leave them out and recompute them on import.
DERIVED_COLUMNS: dict[str, dict[str, str]] = {
    "attempts": {
        "search_text": attempt_search_text_sql("request_body", "response_body"),
        "decision_key": stored_key_sql("decision"),
        "decision_key_version": stored_key_version_sql("decision"),
    },
    "llm_calls": {
        "search_text": llm_search_text_sql("request_body", "unsent_messages", "raw_text")
    },
}

_TIMESTAMP_COLUMNS = (
    ("executions", "started_at"),
    ("executions", "finished_at"),
    ("steps", "started_at"),
    ("steps", "finished_at"),
    ("attempts", "started_at"),
    ("attempts", "responded_at"),
    ("attempts", "decided_at"),
    ("llm_calls", "called_at"),
    ("events", "occurred_at"),
    ("ingested_segments", "ingested_at"),
)

# Version 3: a store that reads well in notebooks and searches fast. `attempts.status` becomes
# `http_status`; `n` is the one attempt number (the policy's counter is derived from the rows
# and kept in `decision.inputs`); times are TIMESTAMPTZ; token counts BIGINT; each prompt is
# stored once, as the request bytes (`unsent_messages` only for a prompt never sent); LLM
# response headers are kept; a lower-cased decoded `search_text` serves text search; the
# `*_text` views decode bodies; `executions.labels` holds free key → text labels, e.g.
# {"test": "<pytest node id>"}. Every ALTER runs before the UPDATEs of the same transaction.
_SCHEMA_V3 = (
    # The stored times are UTC; the cast reads them so (and replays from the WAL so, where the
    # ICU time zones are not loaded yet), not in the machine's time zone.
    "SET TimeZone = 'UTC'",
    "ALTER TABLE executions ADD COLUMN labels JSON",
    "ALTER TABLE attempts RENAME COLUMN status TO http_status",
    "ALTER TABLE attempts DROP COLUMN attempt_number",
    *(
        f"ALTER TABLE {table} ALTER COLUMN {column} SET DATA TYPE TIMESTAMPTZ "
        f"USING CAST({column} AS TIMESTAMPTZ)"
        for table, column in _TIMESTAMP_COLUMNS
    ),
    *(
        f"ALTER TABLE llm_calls ALTER COLUMN {column} SET DATA TYPE BIGINT"
        for column in ("prompt_tokens", "completion_tokens", "total_tokens")
    ),
    "ALTER TABLE llm_calls ADD COLUMN response_headers JSON",
    "ALTER TABLE llm_calls ADD COLUMN unsent_messages JSON",
    "ALTER TABLE llm_calls ADD COLUMN search_text VARCHAR",
    "ALTER TABLE attempts ADD COLUMN search_text VARCHAR",
    "UPDATE llm_calls SET unsent_messages = messages "
    "WHERE messages IS NOT NULL AND coalesce(octet_length(request_body), 0) = 0",
    "ALTER TABLE llm_calls DROP COLUMN messages",
    # A view keeps the column types it was created with; re-create it over the new types.
    f"CREATE OR REPLACE VIEW backoffs AS {_BACKOFFS_SELECT}",
    f"UPDATE attempts SET search_text = {DERIVED_COLUMNS['attempts']['search_text']}",
    f"UPDATE llm_calls SET search_text = {DERIVED_COLUMNS['llm_calls']['search_text']}",
    _attempts_text_view("CREATE", ("search_text",)),
    f"""
    CREATE VIEW llm_calls_text AS
    SELECT * EXCLUDE (request_body, response_body, search_text, unsent_messages),
        coalesce(
            try(CAST(decode(request_body) AS JSON) -> '$.messages'), unsent_messages
        ) AS messages,
        response_headers ->> 'x-request-id' AS request_id,
        response_headers ->> 'retry-after' AS retry_after,
        response_headers ->> 'x-litellm-response-cost' AS response_cost,
        {decoded_text_sql("request_body")} AS request_text,
        {decoded_text_sql("response_body")} AS response_text
    FROM llm_calls
    """,
    "RESET TimeZone",
)

# Version 4: each decision keeps the key of its inputs a what-if groups by (store.decision_keys),
# stamped with the version of the code that computed it; filled here for a store recorded before.
_SCHEMA_V4 = (
    "ALTER TABLE attempts ADD COLUMN decision_key VARCHAR",
    "ALTER TABLE attempts ADD COLUMN decision_key_version VARCHAR",
    refresh_stored_keys_sql("decision IS NOT NULL"),
    _attempts_text_view(
        "CREATE OR REPLACE", ("search_text", "decision_key", "decision_key_version")
    ),
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", _SCHEMA_V1),
    Migration(2, "executions.rerun_of, attempts.recovery and attempts.impact", _SCHEMA_V2),
    Migration(
        3,
        "attempts.http_status, one attempt number, TIMESTAMPTZ, BIGINT tokens, prompts stored "
        "once, LLM response headers, search_text, the attempts_text and llm_calls_text views, "
        "executions.labels",
        _SCHEMA_V3,
    ),
    Migration(4, "attempts.decision_key and attempts.decision_key_version", _SCHEMA_V4),
)
SCHEMA_VERSION = MIGRATIONS[-1].version
STORE_TABLES = (
    "executions",
    "execution_snapshots",
    "steps",
    "attempts",
    "llm_calls",
    "events",
)


# The `schema_info` key an import sets, with the ids of the executions it writes, in the
# transaction before its first committed batch, and deletes in the one that writes their
# `executions` rows. Found set, it names an import that was killed while it wrote (an import
# holds the file throughout): its rows have no `executions` row, and `ensure_schema` removes
# them before anything reads the store.
IMPORT_PENDING_KEY = "import_pending"


def mark_import_pending(conn: duckdb.DuckDBPyConnection, execution_ids: list[str]) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO schema_info VALUES ($key, $ids)",
        {"key": IMPORT_PENDING_KEY, "ids": json.dumps(sorted(execution_ids))},
    )


def clear_import_pending(conn: duckdb.DuckDBPyConnection) -> None:
    conn.execute("DELETE FROM schema_info WHERE key = $key", {"key": IMPORT_PENDING_KEY})


def sweep_dead_import(conn: duckdb.DuckDBPyConnection) -> int:
    """Delete the rows a killed import left (its executions without an `executions` row) and
    its mark, in one transaction; the number of rows deleted (0 when no import was killed)."""
    row = conn.execute(
        "SELECT value FROM schema_info WHERE key = $key", {"key": IMPORT_PENDING_KEY}
    ).fetchone()
    if row is None:
        return 0
    ids = json.loads(row[0])
    deleted = 0
    conn.execute("BEGIN TRANSACTION")
    try:
        for table in STORE_TABLES[1:]:  # every table but executions itself
            found = conn.execute(
                f"DELETE FROM {table} WHERE list_contains($ids, execution_id) "
                "AND execution_id NOT IN (SELECT execution_id FROM executions)",
                {"ids": ids},
            ).fetchone()
            deleted += int(found[0]) if found else 0
        clear_import_pending(conn)
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            conn.execute("ROLLBACK")
        raise
    return deleted


def stored_schema_version(conn: duckdb.DuckDBPyConnection) -> int | None:
    """The store's schema version, or None when the database has no `schema_info` table."""
    has_info = conn.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'schema_info' "
        "AND schema_name = 'main' AND database_name = current_database()"
    ).fetchone()
    if not has_info or not has_info[0]:
        return None
    row = conn.execute("SELECT value FROM schema_info WHERE key = 'schema_version'").fetchone()
    if row is None:
        return None
    try:
        return int(row[0])
    except ValueError:
        return None


def ensure_schema(
    conn: duckdb.DuckDBPyConnection, label: str, *, create: bool, writable: bool = True
) -> int:
    """Check the store's schema version and apply forward migrations; return the version.

    An empty database gets the current schema when `create` is true. A database with other
    tables but no schema version, or with a newer version, is refused and left untouched, as
    is an older one that is not `writable`.
    """
    version = stored_schema_version(conn)
    if version is None:
        table_count = conn.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database()"
        ).fetchone()
        if table_count and table_count[0]:
            raise StoreOpenError(
                f"{label}: a DuckDB database but not a truva-console store "
                "(it has tables but no schema_info version)"
            )
        if not create:
            raise StoreOpenError(
                f"{label}: an empty DuckDB database, not a truva-console store yet "
                "(run 'truva-console run PLAN' to record into it)"
            )
        version = 0
    if version > SCHEMA_VERSION:
        raise StoreOpenError(
            f"{label}: schema version {version} is newer than this truva-console understands "
            f"({SCHEMA_VERSION}); upgrade truva-console"
        )
    if version < SCHEMA_VERSION:
        if not writable:
            raise StoreOpenError(
                f"{label}: schema version {version} needs an upgrade to {SCHEMA_VERSION}, "
                "and the file is read-only here"
            )
        try:
            if version == 0:
                _create(conn)
            else:
                _migrate(conn, version)
        except duckdb.CatalogException as error:  # rolled back: nothing was changed
            # (version 0 here is a stored "0": a database without schema_info has no tables)
            first = str(error).strip().splitlines()[0] if str(error).strip() else "a catalog error"
            raise StoreOpenError(
                f"{label}: damaged store: schema_info says version {version}, but its tables "
                f"do not fit that version ({first}); nothing was changed"
            ) from error
    check_shape(conn, label)
    if writable:
        sweep_dead_import(conn)
    return SCHEMA_VERSION


def _create(conn: duckdb.DuckDBPyConnection) -> None:
    """Give an empty database the current schema: the statements that recreate what
    `MIGRATIONS` build (`current_schema_sql`), in one transaction. Replaying every migration
    (each ALTER a rewrite) took ~10 times as long."""
    conn.execute("BEGIN TRANSACTION")
    try:
        for statement in current_schema_sql():
            conn.execute(statement)
        conn.execute("INSERT INTO schema_info VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            conn.execute("ROLLBACK")
        raise


def _migrate(conn: duckdb.DuckDBPyConnection, from_version: int) -> None:
    """Apply every migration above `from_version` in one transaction."""
    conn.execute("BEGIN TRANSACTION")
    try:
        for migration in MIGRATIONS:
            if migration.version <= from_version:
                continue
            for statement in migration.statements:
                conn.execute(statement)
        conn.execute(
            "INSERT OR REPLACE INTO schema_info VALUES ('schema_version', ?)",
            [str(SCHEMA_VERSION)],
        )
        conn.execute("COMMIT")
    except BaseException:
        # A failed COMMIT has already rolled back; the original error is the one to report.
        with contextlib.suppress(duckdb.Error):
            conn.execute("ROLLBACK")
        raise


_COLUMNS_SQL = """
SELECT table_name, column_name, data_type
FROM duckdb_columns()
WHERE database_name = current_database() AND schema_name = 'main'
ORDER BY table_name, column_index
"""


@functools.cache
def expected_shape() -> dict[str, dict[str, str]]:
    """Every table and view of the current schema with its columns' types, from `MIGRATIONS`.

    Built by applying the migrations to an in-memory database, so it follows every migration.
    """
    return _reference()[0]


@functools.cache
def current_schema_sql() -> tuple[str, ...]:
    """`CREATE` statements of every table, then every view, of the current schema, as DuckDB
    states them after applying `MIGRATIONS` to an in-memory database (so they follow every
    migration); a new store is created with them."""
    return _reference()[1]


@functools.cache
def _reference() -> tuple[dict[str, dict[str, str]], tuple[str, ...]]:
    conn = duckdb.connect(":memory:")
    try:
        _migrate(conn, 0)
        tables = conn.execute(
            "SELECT sql FROM duckdb_tables() WHERE database_name = current_database() "
            "AND schema_name = 'main' ORDER BY table_name"
        ).fetchall()
        views = conn.execute(
            "SELECT sql FROM duckdb_views() WHERE database_name = current_database() "
            "AND schema_name = 'main' AND NOT internal ORDER BY view_name"
        ).fetchall()
        return _shape(conn), tuple(row[0] for row in (*tables, *views))
    finally:
        conn.close()


def _shape(conn: duckdb.DuckDBPyConnection) -> dict[str, dict[str, str]]:
    shape: dict[str, dict[str, str]] = {}
    for table, column, data_type in conn.execute(_COLUMNS_SQL).fetchall():
        shape.setdefault(table, {})[column] = data_type
    return shape


def shape_problems(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """What the store lacks of the current schema: missing tables or views, columns, types."""
    found = _shape(conn)
    problems = []
    for table, columns in expected_shape().items():
        have = found.get(table)
        if have is None:
            problems.append(f"table {table} is missing")
            continue
        for column, data_type in columns.items():
            if column not in have:
                problems.append(f"column {table}.{column} is missing")
            elif have[column] != data_type:
                problems.append(f"column {table}.{column} is {have[column]}, expected {data_type}")
    return problems


def check_shape(conn: duckdb.DuckDBPyConnection, label: str) -> None:
    """Raise StoreOpenError, in one line, when the store lacks tables or columns of its schema."""
    problems = shape_problems(conn)
    if not problems:
        return
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    raise StoreOpenError(
        f"{label}: damaged store (schema version {SCHEMA_VERSION}): {problems[0]}{more}; "
        "nothing was changed — move the file aside to record into a new store, and read what "
        "remains with duckdb"
    )
