"""Package boundaries: the headless packages never load Textual or (executor) DuckDB.

This checks what a real import loads, transitively. The static twin is the import-linter
contracts in pyproject (`make lint`), which also keep Rich out of our headless code: Rich cannot
be checked here because httpx loads it itself whenever click is installed (httpx's optional
command line), as it is in the dev environment through import-linter.
"""

import json
import subprocess
import sys

import pytest

CASES = [
    ("executor", {"textual", "duckdb"}),
    ("executor.runtime", {"textual", "duckdb"}),
    ("executor.policy", {"textual", "duckdb"}),
    ("store", {"textual"}),
    ("store.recorder", {"textual"}),
    ("store.queries", {"textual"}),
    ("store.ingest", {"textual", "console"}),
    ("store.bundle", {"textual", "console"}),
    ("console.cli.main", {"textual"}),
    ("console.entry", {"textual"}),
    ("console.session", {"textual"}),
    ("console.replay.engine", {"textual"}),
    ("console.replay.setup", {"textual"}),
    ("console.replay.edits", {"textual"}),
    ("console.replay.loopback", {"textual"}),
    ("console.replay.rerun", {"textual"}),
    ("console.demo.runner", {"textual"}),
    ("console.render.formats", {"textual"}),
    ("console.render.views", {"textual", "rich"}),
    ("console.render.text", {"textual", "rich"}),
    ("console.render.rich_views", {"textual"}),
    ("console.render.whatif_view", {"textual", "rich"}),
    ("console.render.lint_view", {"textual", "rich"}),
    ("console.cli.explain", {"textual", "rich"}),
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


def test_the_cli_parser_loads_no_http_client() -> None:
    """Every command builds the whole parser; the demo servers, the replay engine and the
    executor (httpx, its TLS, click, rich and pygments: ~9 MB of RSS and ~0.1 s of start-up) are
    imported by the commands that run something, not by `ls`, `sql` or `import` (found while
    measuring the import's peak RSS)."""
    code = ("import sys; from console.cli.main import build_parser; build_parser(lambda a: 0); "
            "print(sorted(m for m in ('httpx', 'httpcore', 'anyio', 'rich', 'openai') "
            "if m in sys.modules))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
