"""Recorded decisions keyed by the inputs a re-decision reads, so identical ones are decided once.

`keyed_decisions(store, execution_ids, key, skip_rules)` returns, per decided attempt of the
executions, (execution id, step id, n, action, rule id, key) in the order `Store.
recorded_decisions` uses, plus the recorded inputs (JSON text) of the first attempt of each
key; the key is the MD5 of the JSON type of the inputs, their field names, and each field's
value or (for `key.by_type` fields) JSON type. It runs in DuckDB over Arrow batches.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from executor.policy.redecide_key import RedecideKey
from store.queries import Store


def _paths(names: Sequence[str]) -> str:
    """A SQL list of JSON paths into the decision's inputs ('' for the inputs themselves)."""
    return "[" + ", ".join(
        "'$.inputs" + (f".{name}" if name else "").replace("'", "''") + "'" for name in names
    ) + "]"


def key_sql(key: RedecideKey) -> tuple[str, str]:
    """The SQL expression of the key (an MD5 hex string) over the columns x, t, ks, and the
    select list that computes those from `a.decision`.

    The decision is parsed three times: values of the keyed fields, JSON types (of the inputs
    and of the fields keyed by type), and the inputs' field names (an unknown one is unreadable).
    """
    gated = [(budget, name) for budget, names in key.gated for name in names]
    gates = list(dict.fromkeys(budget for budget, _ in gated))
    valued = [*key.by_value, *(name for _, name in gated)]
    typed = [*key.by_type, *gates]
    value_at = {name: index + 1 for index, name in enumerate(valued)}
    type_at = {name: index + 2 for index, name in enumerate(typed)}
    masked = ", ".join(
        f"CASE WHEN t[{type_at[budget]}] = 'NULL' THEN json_type(x[{value_at[name]}]) "
        f"ELSE x[{value_at[name]}]::VARCHAR END"
        for budget, name in gated
    ) or "NULL"
    values = f"list_slice(x, 1, {len(key.by_value)})::VARCHAR" if key.by_value else "''"
    return (
        f"md5(concat_ws(chr(31), t::VARCHAR, to_json(ks)::VARCHAR, {values}, "
        f"to_json(list_value({masked}))::VARCHAR))",
        f"json_extract(a.decision, {_paths(valued)}) AS x, "
        f"json_type(a.decision, {_paths(['', *typed])}) AS t, "
        "json_keys(a.decision, '$.inputs') AS ks",
    )


@dataclass(frozen=True, slots=True)
class KeyedDecisions:
    """Decided attempts as an Arrow table (execution_id, step_id, n, action, rule_id, key) in
    execution, step and attempt order; the recorded inputs text (or None) of one attempt of
    each key not already known; and how many attempts were left out by rule."""

    table: pa.Table
    inputs_by_key: dict[str, str | None]
    skipped: int


def keyed_decisions(
    store: Store, execution_ids: Sequence[str], key: RedecideKey, *,
    skip_rules: Sequence[str] = (), known: Container[str] = frozenset(),
) -> KeyedDecisions:
    """The decided attempts of `execution_ids`, minus those whose rule is in `skip_rules`,
    keyed by `key`, with the inputs of the first attempt of each key not in `known`. One
    store session."""
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
        first: dict[str, int] = {}
        for index, row_key in enumerate(table.column("key").to_pylist()):
            if row_key not in known and row_key not in first:
                first[row_key] = index
        row_ids = table.column("row_id").take(list(first.values())).to_pylist()
        texts = dict(conn.execute(
            "SELECT rowid, CAST(json_extract(decision, '$.inputs') AS VARCHAR) FROM attempts "
            "WHERE rowid IN (SELECT unnest($rows))", {"rows": row_ids},
        ).fetchall()) if row_ids else {}
    inputs_by_key = {
        row_key: texts.get(row_id) for row_key, row_id in zip(first, row_ids, strict=True)
    }
    return KeyedDecisions(table.drop_columns(["row_id"]), inputs_by_key,
                          int(skipped_row[0]) if skipped_row else 0)
