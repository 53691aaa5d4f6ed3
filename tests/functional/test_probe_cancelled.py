"""A probe cancelled with Ctrl-C says the request in flight was not graded.

It used to print `pass  missing required key … → no response (cancelled in flight)` and a card
`demo: pass — 0 responses`, and `--json` gave that request `"grade": "pass"`: a verdict on an
answer the tool never gave (docs/contract.md: "recorded but not graded").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.functional.test_probe import _plan
from tests.support.tool_server import ScriptedToolServer, ToolReply


def _cancelled_probe(tmp_path, *options: str) -> tuple[int, str, str]:
    with ScriptedToolServer() as tool:
        tool.script("/capabilities/lookup", ToolReply.ok(delay_s=60))
        child = subprocess.Popen(
            [sys.executable, "-m", "console", "probe", "--no-store", *options,
             str(_plan(tmp_path, tool.base_url)), "--step", "step-1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "OTEL_SDK_DISABLED": "true"},
        )  # fmt: skip
        try:
            assert tool.wait_for_requests(1, timeout_s=60)
            child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=60)
        finally:
            child.kill()
    return child.returncode, out, err


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_the_request_cancelled_in_flight_is_not_graded(tmp_path, as_json) -> None:
    code, out, err = _cancelled_probe(tmp_path, *(["--json"] if as_json else []))
    assert code == 130, err
    if as_json:
        (request,) = json.loads(out)["requests"]
        assert request["transport_error"] == "cancelled"
        assert request["grade"] is None and request["findings"] == []
    else:
        first = out.splitlines()[1]
        assert first.startswith("  -     missing required key `city` → ")
        assert first.endswith("[cancel.in_flight] (not graded)")
        assert "pass" not in out
        assert "demo: not graded — no answer before the probe was cancelled" in out
