"""Fixtures of the TUI tests: the recorded stores they browse, one per test module."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.tui import RealStore, real_store_copy, record_synthetic_store


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory) -> RealStore:
    """Three plans recorded by `truva-console run` on loopback servers (tests.support.tui),
    once per test process; each module gets its own copy of the store."""
    return real_store_copy(tmp_path_factory.mktemp("tui-real"))


@pytest.fixture(scope="module")
def synthetic_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The factory's fixed-id, fixed-time executions in a store file."""
    return record_synthetic_store(tmp_path_factory.mktemp("tui-synthetic") / "debug.duckdb")
