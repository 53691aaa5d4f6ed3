"""A new store is created from the current schema's statements, not by replaying migrations."""

from __future__ import annotations

from pathlib import Path

import duckdb

from store import schema

_CATALOG = (
    "SELECT table_name, column_name, data_type, column_default, is_nullable "
    "FROM duckdb_columns() WHERE database_name = current_database() ORDER BY ALL",
    "SELECT table_name, constraint_type, constraint_column_names "
    "FROM duckdb_constraints() WHERE database_name = current_database() ORDER BY ALL",
    # A view's columns are in duckdb_columns(); its SQL text may list an EXCLUDE in any order.
    "SELECT view_name FROM duckdb_views() "
    "WHERE database_name = current_database() AND NOT internal ORDER BY ALL",
    "SELECT * FROM schema_info ORDER BY ALL",
)


def catalog(conn: duckdb.DuckDBPyConnection) -> list[list[tuple]]:
    return [conn.execute(query).fetchall() for query in _CATALOG]


def test_a_new_store_gets_exactly_the_schema_the_migrations_build(tmp_path: Path) -> None:
    created = duckdb.connect(str(tmp_path / "created.duckdb"))
    migrated = duckdb.connect(str(tmp_path / "migrated.duckdb"))

    version = schema.ensure_schema(created, "created.duckdb", create=True)
    schema._migrate(migrated, 0)

    assert version == schema.SCHEMA_VERSION
    assert catalog(created) == catalog(migrated)
    assert any("PRIMARY KEY" in statement for statement in schema.current_schema_sql())
    assert schema.shape_problems(created) == []
