"""Recorded decisions keyed by the inputs a re-decision reads, so identical ones are decided once.

`keyed_decisions(store, execution_ids, key, ...)` returns, as an Arrow table, (execution id,
step id, n, action, rule id, key) per decided attempt of the executions, in the order
`Store.recorded_decisions` uses, and the recorded inputs (JSON text) of the first attempt of
each key not seen before. The key (`key_sql`) is an MD5 of the inputs' field names and each
field's value, or JSON type for the fields `executor.policy.redecide_key` keys by type;
DuckDB computes it, so the recorded JSON is parsed in C++ and only once per key in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from executor.policy.redecide_key import RedecideKey
from store.queries import Store


def _paths(names: Sequence[str]) -> str:
    """A SQL list of JSON paths into the decision's inputs ('' for the inputs themselves)."""
    return "[" + ", ".join(
        "'$.inputs" + (f".{name}" if name else "").replace("'", "''") + "'" for name in names
    ) + "]"


def key_sql(key: RedecideKey) -> tuple[str, str]:
    """The SQL expression of the key (an MD5 hex string) over the columns x and ks, and the
    select list that computes those from `a.decision`: the decision is parsed twice, once for
    the inputs' field names and once for the values of the fields (a field keyed by type gets
    the JSON type of its value). Inputs without fields add their JSON type (null or {})."""
    gated = [(budget, name) for budget, names in key.gated for name in names]
    extracted = list(dict.fromkeys([*key.by_value, *key.by_type, *(name for _, name in gated)]))
    at = {name: index + 1 for index, name in enumerate(extracted)}
    typed = [f"json_type(x[{at[name]}])" for name in key.by_type]
    typed += [
        f"CASE WHEN json_type(x[{at[budget]}]) = 'NULL' THEN 't' || json_type(x[{at[name]}]) "
        f"ELSE 'v' || x[{at[name]}]::VARCHAR END"
        for budget, name in gated
    ]
    values = f"list_slice(x, 1, {len(key.by_value)})::VARCHAR" if key.by_value else "''"
    expression = (
        "md5(concat_ws(chr(31), to_json(ks)::VARCHAR, "
        "CASE WHEN len(ks) = 0 THEN coalesce(json_type(decision, '$.inputs'), '-') END, "
        f"{values}, to_json(list_value({', '.join(typed) or 'NULL'}))::VARCHAR))"
    )
    select = (
        f"json_extract(a.decision, {_paths(extracted)}) AS x, "
        "json_keys(a.decision, '$.inputs') AS ks, a.decision"
    )
    return expression, select


@dataclass(frozen=True, slots=True)
class KeyedDecisions:
    """Decided attempts as an Arrow table (execution_id, step_id, n, action, rule_id, key) in
    execution, step and attempt order; the recorded inputs text (or None) of one attempt of
    each key not already known; and how many attempts were left out by rule."""

    table: pa.Table
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


def keyed_decisions(
    store: Store, execution_ids: Sequence[str], key: RedecideKey, *,
    skip_rules: Sequence[str] = (), known: pa.Array | None = None,
) -> KeyedDecisions:
    """The decided attempts of `execution_ids`, minus those whose rule is in `skip_rules`,
    keyed by `key`, with the inputs of the first attempt of each key not in `known` (keys of
    earlier batches). One store session."""
    key_expression, extract = key_sql(key)
    where = "a.execution_id IN (SELECT unnest($ids)) AND a.action IS NOT NULL"
    params: dict[str, Any] = {"ids": list(execution_ids), "skip": list(skip_rules)}
    with store.session() as conn:
        skipped_row = conn.execute(
            f"SELECT count(*) FROM attempts AS a WHERE {where} "
            "AND list_contains($skip, a.rule_id)", params,
        ).fetchall()[0] if skip_rules else (0,)
        table = conn.sql(
            "WITH d AS ("
            "  SELECT a.rowid AS row_id, a.execution_id, a.step_id, a.n, a.action, a.rule_id,"
            f"         e.started_at, {extract}"
            "  FROM attempts AS a JOIN executions AS e USING (execution_id)"
            f"  WHERE {where} AND NOT list_contains($skip, coalesce(a.rule_id, ''))"
            ") "
            f"SELECT row_id, execution_id, step_id, n, action, rule_id, {key_expression} AS key "
            "FROM d ORDER BY started_at NULLS FIRST, execution_id, step_id, n",
            params=params,
        ).to_arrow_table()
        first = _first_rows(table, known)
        row_ids = first.column("row_id").to_pylist()
        texts = dict(conn.execute(
            "SELECT rowid, CAST(json_extract(decision, '$.inputs') AS VARCHAR) FROM attempts "
            "WHERE rowid IN (SELECT unnest($rows))", {"rows": row_ids},
        ).fetchall()) if row_ids else {}
    inputs_by_key = {
        row_key: texts.get(row_id)
        for row_key, row_id in zip(first.column("key").to_pylist(), row_ids, strict=True)
    }
    return KeyedDecisions(table.drop_columns(["row_id"]), inputs_by_key,
                          int(skipped_row[0]) if skipped_row else 0)
