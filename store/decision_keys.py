"""Recorded decisions keyed by the inputs a re-decision reads, so identical ones are decided once.

The key (`key_expression`) is an MD5 of the inputs' field names and each field's value, or JSON
type for the fields `executor.policy.redecide_key` keys by type; DuckDB computes it, so the
recorded JSON is parsed in C++ and only once per key in Python.

Every attempt also keeps a key written when it is stored (`attempts.decision_key`, a derived
column of `store.schema`, filled at ingest, import and migration): the key of a re-decision
without overrides (`STORED_KEY`), stamped with `STORED_KEY_VERSION`, a digest of the SQL that
computed it (so of the field lists `executor.rule_reads` and `DecisionInputs` give). That key is
as fine as the key of any overrides that set no budget, or finer (`stored_key_serves`): inputs
alike under it are alike under the overrides' key, so a what-if groups by it without parsing
JSON and keys only one attempt per stored key by its own key. An attempt whose stamp is not
the current one (recorded by another version of the policy code) is keyed from its JSON.

`KeyScan(conn).batch(execution_ids, key, ...)` returns, as an Arrow table, (execution id,
step id, n, action, rule id, delay ms, key) per decided attempt of the executions, in the order
`Store.recorded_decisions` uses, the overrides' key of each row key not seen before, and the
recorded inputs (JSON text) of one attempt of each of those keys not decided before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from executor.config import ExecutorConfig
from executor.policy.redecide_key import GATED_BY, RedecideKey, redecide_key


def _paths(names: Sequence[str]) -> str:
    """A SQL list of JSON paths into the decision's inputs ('' for the inputs themselves)."""
    return "[" + ", ".join(
        "'$.inputs" + (f".{name}" if name else "").replace("'", "''") + "'" for name in names
    ) + "]"


def key_expression(key: RedecideKey, decision: str = "decision") -> str:
    """The SQL expression of the key (an MD5 hex string) of the decision JSON `decision`; NULL
    for a NULL decision. The decision is parsed twice, once for the inputs' field names and
    once for the values of the fields (a field keyed by type gets the JSON type of its value);
    inputs without fields add their JSON type (null or {})."""
    gated = [(budget, name) for budget, names in key.gated for name in names]
    extracted = list(dict.fromkeys([*key.by_value, *key.by_type, *(name for _, name in gated)]))
    at = {name: index + 1 for index, name in enumerate(extracted)}
    typed = [f"json_type(r.x[{at[name]}])" for name in key.by_type]
    typed += [
        f"CASE WHEN json_type(r.x[{at[budget]}]) = 'NULL' THEN 't' || json_type(r.x[{at[name]}]) "
        f"ELSE 'v' || r.x[{at[name]}]::VARCHAR END"
        for budget, name in gated
    ]
    values = f"list_slice(r.x, 1, {len(key.by_value)})::VARCHAR" if key.by_value else "''"
    digest = (
        "md5(concat_ws(chr(31), to_json(r.ks)::VARCHAR, "
        "CASE WHEN len(r.ks) = 0 THEN coalesce(json_type(r.d, '$.inputs'), '-') END, "
        f"{values}, to_json(list_value({', '.join(typed) or 'NULL'}))::VARCHAR))"
    )
    # A one-element list and a lambda: the two parses are bound once and read by name.
    return (
        f"CASE WHEN {decision} IS NOT NULL THEN list_transform([{{"
        f"'x': json_extract({decision}, {_paths(extracted)}), "
        f"'ks': json_keys({decision}, '$.inputs'), 'd': {decision}}}], "
        f"lambda r: {digest})[1] END"
    )


# The key written with every recorded decision: the key without overrides.
STORED_KEY = redecide_key({})
STORED_KEY_VERSION = hashlib.md5(
    key_expression(STORED_KEY).encode(), usedforsecurity=False
).hexdigest()[:16]


def stored_key_sql(decision: str) -> str:
    """SQL for `attempts.decision_key` of the decision JSON `decision`."""
    return key_expression(STORED_KEY, decision)


def stored_key_version_sql(decision: str) -> str:
    """SQL for `attempts.decision_key_version`: the current stamp for a decision, else NULL."""
    return f"CASE WHEN {decision} IS NOT NULL THEN '{STORED_KEY_VERSION}' END"


def refresh_stored_keys_sql(where: str = "TRUE") -> str:
    """SQL that writes the stored key and stamp of the attempts `where` selects from their
    `decision` (the migration to schema 4; after editing decisions by hand, as a test does)."""
    return (
        f"UPDATE attempts SET decision_key = {stored_key_sql('decision')}, "
        f"decision_key_version = {stored_key_version_sql('decision')} WHERE {where}"
    )


def stored_key_serves(overrides: Mapping[str, Any]) -> bool:
    """Whether the stored key is as fine as the key of `overrides`, or finer.

    The stored key carries by value every field a rule reads, and a budget's gated fields by
    value where the recorded budget is set: finer than the overrides' key, which carries the
    fields the overrides replace by type, and the gated fields of a budget set to null by
    type. Only a budget the overrides set to a value makes gated fields matter where the
    recorded budget was null, which the stored key does not see."""
    config = ExecutorConfig(**dict(overrides))
    return all(getattr(config, budget) is None for budget in GATED_BY if budget in overrides)


@dataclass(frozen=True, slots=True)
class KeyedDecisions:
    """Decided attempts as an Arrow table (execution_id, step_id, n, action, rule_id, delay_ms,
    key) in execution, step and attempt order; the overrides' key of each row key not already
    known (`decide_keys`); the recorded inputs text (or None) of one attempt of each of those
    keys not already decided; and how many attempts were left out by rule."""

    table: pa.Table
    decide_keys: dict[str, str]
    inputs_by_key: dict[str, str | None]
    skipped: int


def _first_rows(table: pa.Table, known: pa.Array | None) -> pa.Table:
    """(key, row_id) of the first row of each key of `table` not in `known`."""
    fresh = table.select(["key"]).append_column(
        "index", pa.array(range(table.num_rows), pa.int64())
    )
    if known is not None and len(known):
        fresh = fresh.filter(pc.invert(pc.is_in(fresh.column("key"), value_set=known)))
    if not fresh.num_rows:
        return pa.table({"key": pa.array([], pa.string()), "row_id": pa.array([], pa.int64())})
    firsts = fresh.group_by("key", use_threads=False).aggregate([("index", "min")])
    return table.select(["key", "row_id"]).take(firsts.column("index_min"))


# An attempt whose stored key was computed by this code (`$version`: STORED_KEY_VERSION).
_CURRENT = (
    "coalesce(a.decision_key_version = $version AND a.decision_key IS NOT NULL, false)"
)


class KeyScan:
    """Batches of recorded decisions read over one connection (one store session)."""

    def __init__(self, conn: duckdb.DuckDBPyConnection):
        self.conn = conn
        self._stamps_current: bool | None = None

    def _all_stored(self) -> bool:
        """Whether every decided attempt has its stored key with the current stamp."""
        if self._stamps_current is None:
            row = self.conn.execute(
                f"SELECT count(*) FROM attempts AS a WHERE a.action IS NOT NULL AND NOT {_CURRENT}",
                {"version": STORED_KEY_VERSION},
            ).fetchall()
            self._stamps_current = not row or not row[0][0]
        return self._stamps_current

    def decision_counts(self, execution_ids: Sequence[str]) -> dict[str, int]:
        """How many decided attempts each of `execution_ids` has (absent: none)."""
        return dict(self.conn.execute(
            "SELECT execution_id, count(*) FROM attempts WHERE action IS NOT NULL "
            "AND execution_id IN (SELECT unnest($ids)) GROUP BY execution_id",
            {"ids": list(execution_ids)},
        ).fetchall())

    def step_decision_counts(self, execution_id: str) -> list[tuple[str, int]]:
        """(step id, decided attempts) of one execution, in the order `batch` reads steps."""
        return [(str(step_id), int(count)) for step_id, count in self.conn.execute(
            "SELECT step_id, count(*) FROM attempts WHERE action IS NOT NULL "
            "AND execution_id = $id GROUP BY step_id ORDER BY step_id",
            {"id": execution_id},
        ).fetchall()]

    def batch(
        self, execution_ids: Sequence[str], key: RedecideKey, *, stored: bool,
        skip_rules: Sequence[str] = (), known: pa.Array | None = None,
        decided: Collection[str] = (), steps: tuple[str, str] | None = None,
    ) -> KeyedDecisions:
        """The decided attempts of `execution_ids`, minus those whose rule is in
        `skip_rules`; with `steps` (first, last), only the steps between them, inclusive (for
        an execution too big for one batch). With `stored` (`stored_key_serves` of the
        overrides) each row is keyed by its stored key where the stamp is current, else by
        `key`; for each row key not in `known` (row keys of earlier batches), its `key`; and
        the inputs of one attempt of each such key not in `decided`."""
        conn = self.conn
        # An attempt decided without a recorded decision is keyed '-' (not readable).
        exact = f"coalesce({key_expression(key, 'a.decision')}, '-')"
        where = "a.execution_id IN (SELECT unnest($ids)) AND a.action IS NOT NULL"
        params: dict[str, Any] = {"ids": list(execution_ids), "skip": list(skip_rules)}
        if steps is not None:
            where += " AND a.step_id BETWEEN $first_step AND $last_step"
            params["first_step"], params["last_step"] = steps
        skipped_row = conn.execute(
            f"SELECT count(*) FROM attempts AS a WHERE {where} "
            "AND list_contains($skip, a.rule_id)", params,
        ).fetchall()[0] if skip_rules else (0,)
        # The batch's rows first, without `decision` (MATERIALIZED): a key from the JSON is
        # then computed reading only those rows' decisions (by rowid), not the whole column.
        chosen = (
            "WITH m AS MATERIALIZED (SELECT a.rowid AS row_id, a.execution_id, a.step_id, a.n, "
            "a.action, a.rule_id, a.delay_ms, e.started_at, a.decision_key, {current} AS current "
            "FROM attempts AS a JOIN executions AS e USING (execution_id) "
            f"WHERE {where} AND NOT list_contains($skip, coalesce(a.rule_id, ''))) "
        )
        order = "ORDER BY m.started_at NULLS FIRST, m.execution_id, m.step_id, m.n"
        columns = "m.row_id, m.execution_id, m.step_id, m.n, m.action, m.rule_id, m.delay_ms"
        if stored and self._all_stored():
            # Not even a mention of `decision`: DuckDB would read the column.
            query = (
                f"{chosen.format(current='TRUE')} SELECT {columns}, m.decision_key AS key "
                f"FROM m {order}"
            )
        else:
            current = "FALSE"
            if stored:
                params["version"] = STORED_KEY_VERSION
                current = _CURRENT
            query = (
                f"{chosen.format(current=current)}, "
                f"d AS MATERIALIZED (SELECT a.rowid AS row_id, {exact} AS key FROM attempts AS a "
                "WHERE a.rowid IN (SELECT row_id FROM m WHERE NOT current)) "
                f"SELECT {columns}, CASE WHEN m.current THEN m.decision_key ELSE d.key END AS key "
                f"FROM m LEFT JOIN d USING (row_id) {order}"
            )
        table = conn.sql(query, params=params).to_arrow_table()
        first = _first_rows(table, known)
        row_ids = first.column("row_id").to_pylist()
        first_keys = first.column("key").to_pylist()
        texts: dict[int, str | None] = {}
        if stored and row_ids and key != STORED_KEY:
            # The rows first (MATERIALIZED): else DuckDB keys every row of the vectors read.
            found = conn.execute(
                "WITH a AS MATERIALIZED (SELECT rowid AS row_id, decision FROM attempts "
                "WHERE rowid IN (SELECT unnest($rows))) "
                f"SELECT a.row_id, {exact}, CAST(json_extract(a.decision, '$.inputs') AS VARCHAR) "
                "FROM a", {"rows": row_ids},
            ).fetchall()
            exact_by_row = {row_id: decide_key for row_id, decide_key, _ in found}
            texts = {row_id: text for row_id, _, text in found}
            decide_keys = {
                row_key: exact_by_row[row_id]
                for row_key, row_id in zip(first_keys, row_ids, strict=True)
            }
        else:
            # Keyed by `key` already (or by the stored key, which is `key`: no overrides).
            decide_keys = dict(zip(first_keys, first_keys, strict=True))
        wanted: dict[str, int] = {}
        for row_key, row_id in zip(first_keys, row_ids, strict=True):
            decide_key = decide_keys[row_key]
            if decide_key not in decided and decide_key not in wanted:
                wanted[decide_key] = row_id
        if wanted and not texts:
            texts = dict(conn.execute(
                "SELECT rowid, CAST(json_extract(decision, '$.inputs') AS VARCHAR) "
                "FROM attempts WHERE rowid IN (SELECT unnest($rows))",
                {"rows": list(wanted.values())},
            ).fetchall())
        return KeyedDecisions(
            table.drop_columns(["row_id"]),
            decide_keys,
            {decide_key: texts.get(row_id) for decide_key, row_id in wanted.items()},
            int(skipped_row[0]) if skipped_row else 0,
        )
