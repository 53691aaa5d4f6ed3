"""examples/agent.py: the demo agent records, through the API, a store the console opens."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import io
from pathlib import Path
from types import ModuleType

from tests.support.plans import run_cli
from tests.support.tui import cell, listed_ids, settle_loaded, tui_app

SIZE = (120, 36)

REPO_ROOT = Path(__file__).resolve().parents[2]
AGENT = REPO_ROOT / "examples" / "agent.py"


def load_agent() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_agent", AGENT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_example_agent_records_a_store_the_console_opens(tmp_path: Path) -> None:
    db = tmp_path / "agent.duckdb"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = await asyncio.to_thread(load_agent().main, ["--db", str(db)])
    assert code == 0, out.getvalue()
    assert out.getvalue().splitlines()[:3] == [
        "step-1: succeeded after 2 attempt(s) [success.2xx]",
        "step-2: succeeded after 1 attempt(s) [success.2xx]",
        "flights: stop_terminal [terminal.auth_or_method] request authorization",
    ]
    listed = run_cli("ls", "--db", str(db), "--json")
    assert listed.code == 0, listed.stderr
    flights, trip = listed.json()["executions"]
    assert (trip["status"], trip["labels"], trip["llm_calls"]) == (
        "succeeded", {"agent": "examples/agent.py"}, 1)
    assert (flights["status"], flights["last_failing_rule"]) == ("failed",
                                                                 "terminal.auth_or_method")
    explained = run_cli("explain", trip["execution_id"], "step-1", "--db", str(db))
    assert explained.code == 0, explained.stderr
    assert "analyzer.accept" in explained.stdout

    app = tui_app(db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle_loaded(pilot)
        assert listed_ids(app) == [flights["execution_id"], trip["execution_id"]]
        assert cell(app, flights["execution_id"], "rule") == "terminal.auth_or_method"
        assert cell(app, trip["execution_id"], "status") == "succeeded"
