"""Multi-MB hostile tool bodies never hang `truva-console run`, and SIGINT/SIGTERM stop it at once.

The real binary runs against a loopback tool that answers every attempt with a 4 MB body built
to be slow for backtracking patterns (hex and letter runs after a credential word, `a://`
runs, deep JSON); with no backoff the run spends its time receiving and handling bodies when
the signal arrives.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store.queries import open_store
from tests.support.plans import capability, plan, step, write_plan
from tests.support.tool_server import ToolReply

# Each case bounds the run's or the signal's wall-clock time.
pytestmark = pytest.mark.serial

SIZE = 4_000_000
HEX = "0123456789abcdef"
NO_BACKOFF = {"max_attempts": 100, "initial_delay_ms": 0, "max_delay_ms": 0, "jitter": False}

HOSTILE_BODIES = {
    "hex": json.dumps(
        {"success": False, "error": {"code": "E", "message": "token " + HEX * (SIZE // 16)}}
    ),
    "letters": "next_token " + "a" * SIZE,
    "scheme_runs": "token " + "a://" * (SIZE // 4),
    "deep_json": "[" * (SIZE // 2) + "]" * (SIZE // 2),
}


def _start(tmp_path: Path, base_url: str, *store_args: str) -> subprocess.Popen[str]:
    document = plan(base_url, {"x": capability("x")}, [step("step-1", "x", {"a": 1})],
                    config=NO_BACKOFF)  # fmt: skip
    script = Path(sys.executable).with_name("truva-console")
    return subprocess.Popen(
        [str(script), "run", str(write_plan(tmp_path, document)), "--json", *store_args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _stop(child: subprocess.Popen[str], sig: signal.Signals) -> tuple[float, str, str]:
    sent = time.monotonic()
    child.send_signal(sig)
    try:
        stdout, stderr = child.communicate(timeout=30)
    finally:
        child.kill()
    return time.monotonic() - sent, stdout, stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("body", HOSTILE_BODIES.values(), ids=HOSTILE_BODIES.keys())
def test_a_signal_stops_a_run_busy_with_hostile_500_bodies_within_a_second(
    tmp_path: Path, tool_server, body: str, sig: signal.Signals
) -> None:
    tool_server.script("/capabilities/x", ToolReply(status=500, body=body.encode()))
    child = _start(tmp_path, tool_server.base_url, "--no-store")
    assert tool_server.wait_for_requests(2, timeout_s=60), "the run never resent the request"

    elapsed, stdout, stderr = _stop(child, sig)

    assert elapsed < 1.0, f"{sig.name} took {elapsed:.2f} s"
    assert child.returncode == 130, stderr
    assert json.loads(stdout)["status"] == "cancelled"


def test_with_the_store_the_executor_stops_within_a_second_and_the_run_is_recorded(
    tmp_path: Path, tool_server
) -> None:
    tool_server.script(
        "/capabilities/x", ToolReply(status=500, body=HOSTILE_BODIES["letters"].encode())
    )
    db = tmp_path / "store.duckdb"
    child = _start(tmp_path, tool_server.base_url, "--db", str(db))
    assert tool_server.wait_for_requests(2, timeout_s=60), "the run never resent the request"
    signalled_at = time.time()

    elapsed, stdout, stderr = _stop(child, signal.SIGINT)

    assert child.returncode == 130, stderr
    execution_id = json.loads(stdout)["execution_id"]
    detail = open_store(db).get_execution(execution_id)  # ingests what is still spooled
    assert detail.execution.status == "cancelled", stderr
    assert detail.execution.finished_at is not None
    assert detail.execution.finished_at - signalled_at < 1.0  # the executor saw the signal
    sizes = [attempt.response_size for step in detail.steps for attempt in step.attempts
             if attempt.status == 500]  # fmt: skip
    assert elapsed < 10.0  # then the recorder wrote every multi-MB attempt to the file
    assert sizes and all(size == len(HOSTILE_BODIES["letters"]) for size in sizes)


def test_a_200_with_a_multi_megabyte_hex_dump_finishes_at_once(tmp_path: Path, tool_server) -> None:
    # The run that used to take minutes: its 200 body went through error-text redaction.
    body = {"success": True, "data": {"next_token": "t1", "sha_dump": HEX * (SIZE // 16)}}
    tool_server.script("/capabilities/x", ToolReply(status=200, body=json.dumps(body).encode()))
    child = _start(tmp_path, tool_server.base_url, "--no-store")
    try:
        stdout, stderr = child.communicate(timeout=30)
    finally:
        child.kill()

    assert child.returncode == 0, stderr
    assert json.loads(stdout)["status"] == "succeeded"
