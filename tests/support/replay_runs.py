"""Recorded runs that replay tests start from: real `truva-console run` into a store in tmp_path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.llm_server import ScriptedLLMServer
from tests.support.plans import capability, plan, run_cli, step, write_plan
from tests.support.tool_server import ScriptedToolServer, ToolReply

HOTELS_PATH = "/capabilities/search_hotels"
CITY = {
    "type": "object",
    "properties": {"city_code": {"type": "string"}, "nights": {"type": "integer"}},
    "required": ["city_code"],
}


def record(tmp_path: Path, document: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    """Run `document` with `truva-console run --json` into a store; the store path and output."""
    db = tmp_path / "store" / "debug.duckdb"
    result = run_cli("run", str(write_plan(tmp_path, document)), "--json", "--db", str(db))
    assert result.code == 0, result.stderr
    return db, result.json()


def write_json(tmp_path: Path, name: str, value: Any) -> str:
    """`value` as the JSON file tmp_path/name; its path."""
    path = tmp_path / name
    path.write_text(json.dumps(value), encoding="utf-8")
    return str(path)


def analysis(should_retry: bool, changes: dict | None = None, reason: str = "scripted") -> str:
    """A layer 3 analyzer answer."""
    return json.dumps(
        {
            "should_retry": should_retry,
            "reason": reason,
            "suggested_changes": changes or {},
            "is_transient_error": False,
        }
    )


def record_paris_corrected(
    tmp_path: Path, tool_server: ScriptedToolServer, llm_server: ScriptedLLMServer
) -> tuple[Path, dict[str, Any]]:
    """A recorded step the layer 3 analyzer (at `llm_server`) corrected from PARIS to PAR."""
    tool_server.script(
        HOTELS_PATH,
        ToolReply.error(400, "INVALID_CITY", "INVALID CITY CODE: PARIS", "INPUT_ERROR"),
        ToolReply.ok({"hotels": ["Le Meurice"]}),
    )
    llm_server.script(analysis(True, {"city_code": "PAR"}, "PARIS is not IATA; Paris is PAR"))
    return record(
        tmp_path,
        plan(
            tool_server.base_url,
            {"search_hotels": capability("search_hotels", schema=CITY)},
            [step("step-1", "search_hotels", {"city_code": "PARIS", "nights": 2})],
            query="Find hotels in Paris",
            llm_base_url=llm_server.base_url,
        ),
    )
