"""truva-console debug store: DuckDB schema, recorder, queries and trace bundles."""
