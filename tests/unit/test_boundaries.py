"""Package boundaries: the headless packages never import Textual, Rich or (executor) DuckDB."""

import json
import subprocess
import sys

import pytest

CASES = [
    ("executor", {"textual", "rich", "duckdb"}),
    ("executor.runtime", {"textual", "rich", "duckdb"}),
    ("executor.policy", {"textual", "rich", "duckdb"}),
    ("store", {"textual", "rich"}),
    ("store.recorder", {"textual", "rich"}),
    ("store.queries", {"textual", "rich"}),
    ("store.ingest", {"textual", "rich", "console"}),
    ("store.bundle", {"textual", "rich", "console"}),
]


def _modules_after_import(module: str) -> set[str]:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {name.split(".")[0] for name in json.loads(out.stdout)}


@pytest.mark.parametrize(("module", "forbidden"), CASES, ids=[c[0] for c in CASES])
def test_headless_package_imports_no_ui(module: str, forbidden: set[str]) -> None:
    assert _modules_after_import(module) & forbidden == set()


def test_the_check_can_see_a_ui_import() -> None:
    assert "textual" in _modules_after_import("textual.app")
