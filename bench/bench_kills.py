"""SIGKILL a real `truva-console run` at random points and count the runs the store kept whole.

    python bench/bench_kills.py [--kills 50] [--seed 8] [--source DIR]

Each round runs a 40-step chain against a loopback tool (30 ms per answer), kills the process
after a random number of answers (0: once the first request arrived), then opens the store. A
round survives when the execution is there, `interrupted`, with an attempt for every request the
tool received; the script also counts answers recorded among those sent over 250 ms before the
kill.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.tool_server import ScriptedToolServer, ToolReply  # noqa: E402

CHILD = "import sys; from console.entry import main; raise SystemExit(main(sys.argv[1:]))"


class TimedToolServer(ScriptedToolServer):
    def __init__(self) -> None:
        self.responded: list[tuple[float, bytes]] = []
        super().__init__()

    def _handle(self, handler, request, request_number: int) -> None:
        super()._handle(handler, request, request_number)
        handler.wfile.flush()
        with self._lock:
            self.responded.append((time.monotonic(), request.body))


def chain(base_url: str, steps: int) -> dict:
    return {
        "query": "kill me",
        "tools": {"demo": {"base_url": base_url}},
        "capabilities": {"demo.work": {"path": "/capabilities/work", "description": "work"}},
        "steps": [
            {"id": f"step-{i}", "tool": "demo", "capability": "work", "parameters": {"i": i},
             **({"depends_on": [f"step-{i - 1}"]} if i > 1 else {})}
            for i in range(1, steps + 1)
        ],
        "config": {"initial_delay_ms": 1, "max_delay_ms": 5},
    }


def one_round(work: Path, source: Path, answers_before_kill: int, index: int) -> dict:
    db = work / f"kill-{index}.duckdb"
    env = {**os.environ, "PYTHONPATH": str(source)}
    with TimedToolServer() as tool:
        tool.script("/capabilities/work", ToolReply.ok({"done": True}, delay_s=0.03))
        plan = work / f"plan-{index}.json"
        plan.write_text(json.dumps(chain(tool.base_url, 40)))
        process = subprocess.Popen(
            [sys.executable, "-c", CHILD, "run", str(plan), "--db", str(db)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=work,
        )  # fmt: skip
        tool.wait_for_requests(max(answers_before_kill, 1), timeout_s=60)
        while len(tool.responded) < answers_before_kill and process.poll() is None:
            threading.Event().wait(0.001)
        process.kill()
        killed_at = time.monotonic()
        process.wait()
        # A request the kill cut short (headers sent, body not) is not a whole request.
        received = {request.body for request in tool.received() if request.json is not None}
        old_answers = {body for at, body in tool.responded if killed_at - at > 0.25}
    code = (
        "import sys, json; from store.queries import open_store\n"
        "s = open_store(sys.argv[1]); page = s.list_executions()\n"
        "out = {'executions': page.total}\n"
        "if page.total:\n"
        "    d = s.get_execution(page.executions[0].execution_id)\n"
        "    out['status'] = d.execution.status\n"
        "    at = [a for st in d.steps for a in st.attempts]\n"
        "    out['sent'] = [bytes(a.request_body or b'').decode() for a in at]\n"
        "    out['answered'] = [bytes(a.request_body or b'').decode() for a in at"
        " if a.status is not None]\n"
        "print(json.dumps(out))\n"
    )
    if not db.exists():
        return {"survived": False, "why": "no store file", "received": len(received)}
    result = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True,
                            text=True, env=env, cwd=ROOT)  # fmt: skip
    if result.returncode:
        return {"survived": False, "why": result.stderr.strip()[-200:], "received": len(received)}
    found = json.loads(result.stdout)
    sent = {body.encode() for body in found.get("sent", [])}
    answered = {body.encode() for body in found.get("answered", [])}
    survived = (
        found["executions"] == 1 and found.get("status") == "interrupted" and received <= sent
    )
    return {
        "survived": survived,
        "received": len(received),
        "recorded": len(sent),
        "old_answers": len(old_answers),
        "old_answers_recorded": len(old_answers & answered),
        "status": found.get("status"),
        "missing": sorted(body.decode() for body in received - sent)[:3],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--source", type=Path, default=ROOT)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    survived = 0
    old_answers = old_recorded = 0
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.kills):
            point = rng.randint(0, 30)
            outcome = one_round(Path(tmp), args.source, point, index)
            survived += outcome["survived"]
            old_answers += outcome.get("old_answers", 0)
            old_recorded += outcome.get("old_answers_recorded", 0)
            if not outcome["survived"]:
                print(f"round {index} (kill after {point} answers): LOST {outcome}")
    print(f"{args.source}: {survived} of {args.kills} killed runs kept whole; answers sent over "
          f"250 ms before a kill recorded: {old_recorded} of {old_answers}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
