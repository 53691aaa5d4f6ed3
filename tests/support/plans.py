"""Builders for plan documents and a runner for `truva-console` in-process or as a subprocess."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.entry import main

FAST_BACKOFF = {"initial_delay_ms": 1, "max_delay_ms": 5}


def capability(name: str, *, schema: dict | None = None, description: str = "",
               orchestrator: bool = False, side_effects: str = "none") -> dict[str, Any]:
    """A capability entry POSTed at /capabilities/<name>."""
    entry: dict[str, Any] = {"path": f"/capabilities/{name}",
                             "description": description or f"The {name} capability"}
    if schema is not None:
        entry["schema"] = schema
    if orchestrator:
        entry["orchestrator"] = True
    if side_effects != "none":
        entry["side_effects"] = side_effects
    return entry


def step(step_id: str, cap: str, parameters: dict | None = None, *, tool: str = "demo",
         depends_on: list[str] | None = None, hitl_approved: list[str] | None = None) -> dict:
    """A step entry."""
    entry: dict[str, Any] = {"id": step_id, "tool": tool, "capability": cap,
                             "parameters": parameters or {}}
    if depends_on:
        entry["depends_on"] = depends_on
    if hitl_approved:
        entry["hitl_approved"] = hitl_approved
    return entry


def plan(base_url: str, capabilities: dict[str, dict], steps: list[dict], *,
         query: str = "test query", config: dict | None = None,
         llm_base_url: str | None = None, tool: str = "demo") -> dict[str, Any]:
    """A plan with one tool at `base_url`; config defaults to a fast backoff."""
    document: dict[str, Any] = {
        "query": query,
        "tools": {tool: {"base_url": base_url}},
        "capabilities": {f"{tool}.{name}": entry for name, entry in capabilities.items()},
        "steps": steps,
        "config": {**FAST_BACKOFF, **(config or {})},
    }
    if llm_base_url is not None:
        document["llm"] = {"base_url": llm_base_url, "model": "scripted-model"}
    return document


def chain_plan(base_url: str, steps: int) -> dict:
    """`steps` steps, each waiting for the one before: one request at a time."""
    return plan(
        base_url,
        {"work": capability("work")},
        [
            step(f"step-{i}", "work", {"i": i}, depends_on=[f"step-{i - 1}"] if i > 1 else None)
            for i in range(1, steps + 1)
        ],
    )


@dataclass(frozen=True, slots=True)
class CliResult:
    """Exit code and captured output of one `truva-console` invocation."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """stdout decoded as JSON."""
        return json.loads(self.stdout)


def write_plan(tmp_path: Path, document: dict[str, Any], name: str = "plan.json") -> Path:
    """Write `document` as a plan file and return its path."""
    path = tmp_path / name
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


def run_cli(*argv: str) -> CliResult:
    """Run `truva-console ARGV` in-process, capturing stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return CliResult(code, out.getvalue(), err.getvalue())


def run_plan_json(tmp_path: Path, document: dict[str, Any], *extra: str) -> dict[str, Any]:
    """`truva-console run PLAN --json`; asserts exit 0 and returns the document."""
    result = run_cli("run", str(write_plan(tmp_path, document)), "--json", *extra)
    assert result.code == 0, result.stderr
    return result.json()


def run_subprocess(*argv: str, timeout: float = 60.0, **kwargs: Any) -> subprocess.CompletedProcess:
    """Run the real `truva-console` entry point as a child process."""
    script = Path(sys.executable).with_name("truva-console")
    return subprocess.run([str(script), *argv], capture_output=True, text=True,
                          timeout=timeout, **kwargs)
