"""The CLI refuses to start when another `executor` or `store` package shadows ours (SPEC §4)."""

from __future__ import annotations

import os

import pytest

from tests.support.plans import run_subprocess


@pytest.mark.parametrize("name", ["executor", "store"])
def test_a_shadowing_package_is_named_with_its_path(tmp_path, name):
    fake = tmp_path / "site" / name
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('"""An unrelated PyPI package."""\n')
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    result = run_subprocess("ls", env=env)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert f"package {name!r} is imported from {fake / '__init__.py'}" in lines[0]
    assert f"pip uninstall {name}" in lines[0]


def test_our_own_installation_starts(tmp_path):
    env = {**os.environ, "TRUVA_DB": str(tmp_path / "none.duckdb")}
    result = run_subprocess("--help", env=env)
    assert result.returncode == 0
    assert "run" in result.stdout
