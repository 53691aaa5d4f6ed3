"""The console in a real terminal: tmux runs `truva-console --samples`, keys go in with
`send-keys`, the screen comes back with `capture-pane`.

Checked here, as a user would: an execution opens on its failing step, F1 opens the help of the
focused pane, F3 hands the focused text to `$PAGER` (a fake pager that saves what it was given)
and the console comes back when the pager exits, and ctrl+f in the Decision tab counts the
matches of the deciding rule's id.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

TMUX = shutil.which("tmux")
pytestmark = [
    pytest.mark.skipif(
        TMUX is None, reason="tmux is not installed (apt-get install tmux; .ci/run installs it)"
    ),
    pytest.mark.serial,  # a real terminal polled against deadlines
]
CONSOLE = str(Path(sys.executable).with_name("truva-console"))
WAIT_S = 60.0


def _tmux(*args: str) -> str:
    return subprocess.run([TMUX, *args], capture_output=True, text=True, check=True,
                          timeout=30).stdout  # fmt: skip


class Terminal:
    """One detached tmux session running a command at 120×36."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.name = f"truva-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{key}={_quote(value)}" for key, value in env.items())
        _tmux("new-session", "-d", "-s", self.name, "-x", "120", "-y", "36",
              f"env {exports} {' '.join(_quote(part) for part in command)}")  # fmt: skip

    def screen(self) -> str:
        return _tmux("capture-pane", "-p", "-t", self.name)

    def keys(self, *keys: str) -> None:
        _tmux("send-keys", "-t", self.name, *keys)

    def wait_for(self, condition: Callable[[str], bool], what: str) -> str:
        deadline = time.monotonic() + WAIT_S
        while True:
            text = self.screen()
            if condition(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {WAIT_S:.0f} s for {what}; the screen shows:\n{text}")
            time.sleep(0.1)  # polling the terminal for a condition, not waiting a fixed time

    def close(self) -> None:
        subprocess.run([TMUX, "kill-session", "-t", self.name], capture_output=True, timeout=30)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _cli_json(*argv: str) -> dict:
    out = subprocess.run([CONSOLE, "--samples", *argv, "--json"], capture_output=True,
                         text=True, check=True, timeout=120).stdout
    return json.loads(out)


@pytest.fixture
def failing_sample() -> dict:
    """The newest failed sample execution (as `ls --status failed` lists it first) and the rule
    that ended its first failing step (as `explain` tells it)."""
    execution = _cli_json("ls", "--status", "failed")["executions"][0]
    steps = _cli_json("explain", execution["execution_id"])["steps"]
    first = next(step for step in steps if step["status"] in ("failed", "rejected"))
    return {**execution, "first_failing_step": first["step_id"],
            "first_failing_rule": first["final_rule_id"]}


@pytest.fixture
def terminal(tmp_path: Path):
    pager = tmp_path / "pager.sh"
    # Like less, the pager is given the file to show; this one saves it and exits.
    pager.write_text(f"#!/bin/sh\ncat \"$1\" > {_quote(str(tmp_path / 'paged.txt'))}\n")
    pager.chmod(0o755)
    env = {"PAGER": str(pager), "TERM": "xterm-256color", "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "PATH": os.environ.get("PATH", "")}
    session = Terminal([CONSOLE, "--samples"], env)
    try:
        yield session
    finally:
        session.close()


def test_an_execution_opens_on_its_failing_step_and_f1_f3_work(terminal, failing_sample,
                                                                 tmp_path):
    execution_id = failing_sample["execution_id"]
    rule = failing_sample["first_failing_rule"]
    terminal.wait_for(lambda text: execution_id in text, "the executions list")
    before = terminal.screen()
    terminal.keys("/")
    terminal.wait_for(lambda text: text != before and "filter:" in text, "the focused filter bar")
    terminal.keys("-l", "status:failed")
    terminal.wait_for(lambda text: "status:failed" in text, "the typed filter")
    terminal.keys("Enter")
    terminal.wait_for(lambda text: "cancelled" not in text.split("Executions", 1)[-1]
                      and execution_id in text, "the list of failed executions")  # fmt: skip
    terminal.keys("Enter")
    opened = terminal.wait_for(lambda text: f"by rule {rule}" in text,
                               f"the execution screen deciding by {rule}")  # fmt: skip
    # The decisive attempt of the first failing step is what the decision panel shows.
    assert failing_sample["first_failing_step"] in opened

    terminal.keys("F1")
    # F1 opens the help of the focused pane (the steps table) with its keys and CLI twins.
    helped = terminal.wait_for(lambda text: "Keys of the Steps pane" in text,
                               "the help screen of the focused pane")  # fmt: skip
    assert "CLI twin" in helped and "Execution screen" in helped
    terminal.keys("Escape")
    terminal.wait_for(lambda text: rule in text, "the execution screen again")

    terminal.keys("F3")
    paged = tmp_path / "paged.txt"
    deadline = time.monotonic() + WAIT_S
    while not (paged.exists() and paged.stat().st_size):
        assert time.monotonic() < deadline, f"F3 gave $PAGER nothing; screen:\n{terminal.screen()}"
        time.sleep(0.1)
    terminal.wait_for(lambda text: rule in text, "the console back after the pager")
    assert paged.read_text().strip()

    # ctrl+f in the Decision tab finds the deciding rule's id, with the match count beside it.
    terminal.keys("1")
    terminal.keys("C-f")
    terminal.wait_for(lambda text: "search (Enter" in text, "the search bar")
    terminal.keys("-l", rule)
    found = terminal.wait_for(lambda text: re.search(r"\b1/\d+ match", text) is not None,
                              f"the matches of {rule} counted")  # fmt: skip
    total = int(re.search(r"\b1/(\d+) match", found).group(1))
    assert total >= 2  # "… by rule R" and "Inputs R read"
    terminal.keys("Enter")
    terminal.wait_for(lambda text: f"2/{total} match" in text, "the next match")


def test_a_burst_of_keys_lands_as_if_typed_slowly(terminal, failing_sample):
    """One `send-keys` of `/status:failed`, Enter, `j`, Enter reaches the terminal as one read:
    the filter takes the text (not the table, whose `s` sorts and `:` opens the SQL screen),
    Enter applies it and moves to the table, `j` moves down, Enter opens the second failed
    execution, as the same keys typed one at a time would."""
    second = _cli_json("ls", "--status", "failed")["executions"][1]["execution_id"]
    terminal.wait_for(lambda text: failing_sample["execution_id"] in text, "the executions list")
    terminal.keys("/status:failed", "Enter", "j", "Enter")
    opened = terminal.wait_for(lambda text: "Steps" in text and second in text
                               and "Filter" not in text, "the second failed execution")
    assert "SQL" not in opened.splitlines()[0]
